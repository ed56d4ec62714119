// tool.tab_borrow (docs/protocol.md, "Tools"): the person always confirms, in a small window of
// the extension's own naming the agent and the tab, with Allow and Deny. It waits 60 s unless the
// person set otherwise (the contract's 5 s is too short for someone away from the screen). Deny or
// a closed window → `cancelled` with reason `borrow_denied`; no answer in time → `cancelled` with
// reason `borrow_timed_out`; the same message either way, so a contract-only gateway relays it
// unchanged.

import { browser } from 'wxt/browser';
import { invalid, notFound, ToolError } from '../errors';
import type { Params } from '../dispatcher';
import type { AgentSession, Sessions } from '../sessions';
import { id, optUint, sessionOf } from './params';
import { refusal } from '../siterules';

/** How long after the countdown the prompt fails closed on its own (the page's timer is the person's). */
const FAIL_CLOSED_GRACE_MS = 1_650;

export interface BorrowRequest {
  /** Who asks: "Booker (Travel team)". */
  agent: string;
  title: string;
  url: string;
  countdownMs: number;
}

/** How the person answered. */
export type BorrowAnswer = 'allow' | 'deny' | 'timeout';

interface Pending {
  details: BorrowRequest;
  answer: (a: BorrowAnswer) => void;
}

/** Confirmations waiting for the person, by request id. */
export class Confirmations {
  private readonly pending = new Map<string, Pending>();

  details(request: string): BorrowRequest | undefined {
    return this.pending.get(request)?.details;
  }

  /** The confirm page's answer (its own countdown reaching zero is `timeout`). */
  answer(request: string, answer: BorrowAnswer): void {
    this.pending.get(request)?.answer(answer);
  }

  /** Show the prompt and wait for the answer; a closed prompt, no usable UI or an abort deny. */
  async ask(details: BorrowRequest, signal: AbortSignal): Promise<BorrowAnswer> {
    const request = crypto.randomUUID();
    let windowId: number | undefined;
    let settle: (a: BorrowAnswer) => void = () => undefined;
    const decision = new Promise<BorrowAnswer>((resolve) => {
      settle = resolve;
    });
    const timer = setTimeout(() => settle('timeout'), details.countdownMs + FAIL_CLOSED_GRACE_MS);
    const onAbort = () => settle('deny');
    const onRemoved = (closed: number) => {
      if (closed === windowId) settle('deny');
    };
    this.pending.set(request, { details, answer: (a) => settle(a) });
    signal.addEventListener('abort', onAbort);
    browser.windows.onRemoved.addListener(onRemoved);
    const url = browser.runtime.getURL(`/confirm.html?request=${request}`);
    try {
      windowId = (await browser.windows.create({ url, type: 'popup', focused: true, width: 460, height: 300 }))?.id;
    } catch (first) {
      // A window can fail to open while another is being created or closed; try once
      // more with the browser's own placement before failing closed.
      try {
        windowId = (await browser.windows.create({ url, type: 'popup', focused: true }))?.id;
      } catch {
        console.warn('latchkey: the borrow confirmation could not be shown', first);
        settle('deny');
      }
    }
    try {
      return await decision;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      browser.windows.onRemoved.removeListener(onRemoved);
      this.pending.delete(request);
      if (windowId !== undefined) await browser.windows.remove(windowId).catch(() => undefined);
    }
  }
}

/** What the confirmation says about the session, and how long it waits. */
export interface BorrowContext {
  confirmations: Confirmations;
  /** "Booker (Travel team)" for the session. */
  agentOf: (session: AgentSession) => Promise<string>;
  /** The person's wait, in ms. */
  waitMs: () => Promise<number>;
}

export async function tabBorrow(p: Params, sessions: Sessions, signal: AbortSignal, ctx: BorrowContext): Promise<unknown> {
  const session = sessionOf(p, sessions, 'tool.tab_borrow');
  const tabId = id(p, 'tab_id', 'tool.tab_borrow');
  if (p.confirm !== undefined && typeof p.confirm !== 'boolean') throw invalid('confirm must be a boolean');
  let tab: chrome.tabs.Tab;
  try {
    tab = (await browser.tabs.get(tabId)) as chrome.tabs.Tab;
  } catch {
    throw notFound(`tab ${tabId} not found`);
  }
  if (session.borrowed.has(tabId)) throw invalid(`tab ${tabId} is already borrowed by this session`);
  const borrower = sessions.borrowerOf(tabId);
  if (borrower) throw ToolError.reason('permission_denied', `tab ${tabId} is borrowed by another session`, 'borrow_conflict');
  if (tab.windowId === session.windowId) throw invalid(`tab ${tabId} is already in this session's Agent Window`);
  if (sessions.isAgentWindow(tab.windowId)) {
    throw ToolError.reason('permission_denied', `tab ${tabId} belongs to another session`, 'agent_window_scope');
  }
  // A tab showing a site the session may not open is not lent to it either.
  const refused = session.rules && refusal(session.rules, tab.url ?? '', new URL(browser.runtime.getURL('/')).origin);
  if (refused) {
    throw ToolError.reason('permission_denied', `tab ${tabId} shows ${refused.host}, which this session's policy does not allow`, refused.reason, {
      host: refused.host,
      ...(refused.pattern ? { pattern: refused.pattern } : {}),
    });
  }
  // The agent's own deadline, when it gave one, bounds the wait too.
  const asked = optUint(p, 'timeout_ms', 1);
  const wait = Math.min(await ctx.waitMs(), asked ?? Number.MAX_SAFE_INTEGER);
  const answer = await ctx.confirmations.ask(
    { agent: await ctx.agentOf(session), title: tab.title ?? '', url: tab.url ?? '', countdownMs: wait },
    signal,
  );
  if (answer === 'deny') throw ToolError.reason('cancelled', 'tab_borrow cancelled by user', 'borrow_denied');
  if (answer === 'timeout') {
    throw ToolError.reason('cancelled', `tab_borrow cancelled: nobody answered within ${Math.round(wait / 1000)} s`, 'borrow_timed_out');
  }
  const originalWindowId = tab.windowId;
  const originalIndex = tab.index;
  // Lent before it moves, so that its arrival in the Agent Window finds it the agent's.
  session.borrowed.set(tabId, { originalWindowId, originalIndex });
  try {
    await browser.tabs.move(tabId, { windowId: session.windowId, index: -1 });
  } catch (e) {
    session.borrowed.delete(tabId);
    throw e;
  }
  await browser.tabs.update(tabId, { active: true });
  return { tab_id: tabId, original_window_id: originalWindowId, original_index: originalIndex, agent_window_id: session.windowId };
}
