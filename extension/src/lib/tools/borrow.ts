// tool.tab_borrow (docs/protocol.md, "Tools"): the person always confirms, in a small window of
// the extension's own with Allow and Deny. The countdown is 5 s; no answer by the fail-closed
// deadline (6.65 s), a closed window or Deny → `cancelled`.

import { browser } from 'wxt/browser';
import { invalid, notFound, ToolError } from '../errors';
import type { Params } from '../dispatcher';
import type { Sessions } from '../sessions';
import { id, sessionOf } from './params';
import { refusal } from '../siterules';

export const CONFIRM_COUNTDOWN_MS = 5_000;
export const CONFIRM_FAIL_CLOSED_MS = 6_650;

export interface BorrowRequest {
  title: string;
  url: string;
  countdownMs: number;
}

interface Pending {
  details: BorrowRequest;
  answer: (allow: boolean) => void;
}

/** Confirmations waiting for the person, by request id. */
export class Confirmations {
  private readonly pending = new Map<string, Pending>();

  details(request: string): BorrowRequest | undefined {
    return this.pending.get(request)?.details;
  }

  /** The confirm page's answer. */
  answer(request: string, allow: boolean): void {
    this.pending.get(request)?.answer(allow);
  }

  /** Show the prompt and wait for Allow (true), or Deny / close / timeout / abort (false). */
  async ask(details: BorrowRequest, signal: AbortSignal): Promise<boolean> {
    const request = crypto.randomUUID();
    let windowId: number | undefined;
    let settle: (allow: boolean) => void = () => undefined;
    const decision = new Promise<boolean>((resolve) => {
      settle = resolve;
    });
    const timer = setTimeout(() => settle(false), CONFIRM_FAIL_CLOSED_MS);
    const onAbort = () => settle(false);
    const onRemoved = (closed: number) => {
      if (closed === windowId) settle(false);
    };
    this.pending.set(request, { details, answer: (allow) => settle(allow) });
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
        settle(false);
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

export async function tabBorrow(p: Params, sessions: Sessions, signal: AbortSignal, confirmations: Confirmations): Promise<unknown> {
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
  const allow = await confirmations.ask(
    { title: tab.title ?? '', url: tab.url ?? '', countdownMs: CONFIRM_COUNTDOWN_MS },
    signal,
  );
  if (!allow) throw new ToolError('cancelled', 'tab_borrow cancelled by user');
  const originalWindowId = tab.windowId;
  const originalIndex = tab.index;
  await browser.tabs.move(tabId, { windowId: session.windowId, index: -1 });
  await browser.tabs.update(tabId, { active: true });
  session.borrowed.set(tabId, { originalWindowId, originalIndex });
  return { tab_id: tabId, original_window_id: originalWindowId, original_index: originalIndex, agent_window_id: session.windowId };
}
