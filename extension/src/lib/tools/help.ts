// tool.request_help (docs/protocol.md, "Tools"): hand the page to the person — a CAPTCHA, an MFA
// prompt, a QR code. The tab is focused; a panel on the page shows the agent's title and prompt
// with Done and Cancel, targets are outlined, a notification and the toolbar badge say that
// someone is waiting, and the popup lists the request too. Outcomes: Done → `continued`, Cancel
// → `cancelled`, the completion criteria holding for `stable_for_ms` (polled every 500 ms) →
// `completed`, the wait running out → `timed_out`. A `cancel` from the gateway is the error
// `cancelled`.

import { browser } from 'wxt/browser';
import { invalid, ToolError } from '../errors';
import { checkpoint, type Params } from '../dispatcher';
import { type BannerMark, endHelpPanel, showHelpPanel } from '../banner';
import type { Condition, Criteria } from '../page/agent';
import { pageCall } from '../page/bridge';
import { optStr, optUint, refuseRestricted, scopedTab, sessionOf, str } from './params';
import { refKey, type PageContext } from './snapshot';

export const HELP_TIMEOUT_MS = 300_000;
export const HELP_POLL_MS = 500;
const STABLE_DEFAULT_MS = 1_000;
const DEFAULT_TITLE = 'An agent needs your help';
const CONDITION_KEYS = ['url_contains', 'url_matches', 'selector_exists', 'selector_missing', 'text_exists', 'text_missing'];

export type HelpOutcome = 'continued' | 'cancelled' | 'completed' | 'timed_out';

export interface PendingHelp {
  request: string;
  sessionId: string;
  tabId: number;
  title: string;
  prompt: string;
  answer: (outcome: 'continued' | 'cancelled') => void;
}

/** Help requests waiting for the person; the toolbar icon says so (lib/badge.ts). */
export class HelpRequests {
  private readonly pending = new Map<string, PendingHelp>();

  constructor(
    private readonly markOf: (tabId: number) => Promise<BannerMark>,
    /** Told whenever the number waiting changes (the toolbar icon). */
    private readonly changed: () => void = () => undefined,
  ) {
    browser.notifications?.onButtonClicked.addListener((id, button) => this.answer(id, button === 0 ? 'continued' : 'cancelled'));
    browser.notifications?.onClicked.addListener((id) => {
      const p = this.pending.get(id);
      if (p) void focus(p.tabId);
    });
  }

  /** Whether a request waits in `tabIds`. */
  waitingIn(tabIds: Iterable<number>): boolean {
    const tabs = new Set(tabIds);
    return [...this.pending.values()].some((p) => tabs.has(p.tabId));
  }

  list(): { request: string; title: string; prompt: string; tab: number }[] {
    return [...this.pending.values()].map((p) => ({ request: p.request, title: p.title, prompt: p.prompt, tab: p.tabId }));
  }

  /** The person's answer, from the page panel, the notification or the popup. */
  answer(request: string, outcome: 'continued' | 'cancelled', fromTab?: number): boolean {
    const p = this.pending.get(request);
    if (!p || (fromTab !== undefined && fromTab !== p.tabId)) return false;
    p.answer(outcome);
    return true;
  }

  /** The tab went away: nobody can help there any more. */
  tabClosed(tabId: number): void {
    for (const p of this.pending.values()) if (p.tabId === tabId) p.answer('cancelled');
  }

  /** A page of a tab with a pending request loaded: show the panel again. */
  async reshow(tabId: number): Promise<void> {
    for (const p of this.pending.values()) {
      if (p.tabId === tabId) await showHelpPanel(tabId, await this.markOf(tabId), { request: p.request, title: p.title, prompt: p.prompt });
    }
  }

  async add(p: PendingHelp): Promise<void> {
    this.pending.set(p.request, p);
    this.changed();
    await showHelpPanel(p.tabId, await this.markOf(p.tabId), { request: p.request, title: p.title, prompt: p.prompt });
    await browser.notifications
      ?.create(p.request, {
        type: 'basic',
        iconUrl: browser.runtime.getURL('/icon-128.png'),
        title: p.title,
        message: p.prompt.slice(0, 500),
        buttons: [{ title: 'Done' }, { title: 'Cancel' }],
        requireInteraction: true,
        priority: 2,
      })
      .catch(() => undefined);
  }

  async remove(request: string): Promise<void> {
    const p = this.pending.get(request);
    if (!p) return;
    this.pending.delete(request);
    this.changed();
    await browser.notifications?.clear(request).catch(() => undefined);
    await endHelpPanel(p.tabId);
  }

  /** How many requests wait for the person. */
  get size(): number {
    return this.pending.size;
  }

}

async function focus(tabId: number): Promise<void> {
  const tab = await browser.tabs.update(tabId, { active: true }).catch(() => undefined);
  if (tab?.windowId !== undefined) await browser.windows.update(tab.windowId, { focused: true }).catch(() => undefined);
}

function conditionsOf(list: unknown, name: string): Condition[] | undefined {
  if (list === undefined) return undefined;
  if (!Array.isArray(list)) throw invalid(`completion_criteria.${name} must be an array of conditions`);
  return list.map((c) => {
    if (typeof c !== 'object' || c === null || Array.isArray(c)) throw invalid(`completion_criteria.${name} holds objects`);
    const cond = c as Record<string, unknown>;
    const keys = Object.keys(cond).filter((k) => CONDITION_KEYS.includes(k));
    if (keys.length === 0) throw invalid(`a condition needs one of ${CONDITION_KEYS.join(', ')}`);
    for (const k of keys) if (typeof cond[k] !== 'string') throw invalid(`${k} must be a string`);
    if (typeof cond.url_matches === 'string') {
      try {
        new RegExp(cond.url_matches);
      } catch {
        throw invalid(`url_matches ${JSON.stringify(cond.url_matches)} is not a valid regular expression`);
      }
    }
    return Object.fromEntries(keys.map((k) => [k, cond[k]])) as Condition;
  });
}

/** Parse `completion_criteria`; undefined when absent. */
export function criteriaOf(p: Params): { criteria: Criteria; stableMs: number } | undefined {
  const raw = p.completion_criteria;
  if (raw === undefined) return undefined;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw invalid('completion_criteria must be an object');
  const c = raw as Record<string, unknown>;
  const any = conditionsOf(c.any, 'any');
  const all = conditionsOf(c.all, 'all');
  if (!any?.length && !all?.length) throw invalid('completion_criteria needs conditions in any or all');
  const stableMs = optUint(c, 'stable_for_ms') ?? STABLE_DEFAULT_MS;
  return { criteria: { ...(any ? { any } : {}), ...(all ? { all } : {}) }, stableMs };
}

interface TargetParam {
  ref?: string;
  selector?: string;
}

function targetsOf(p: Params): TargetParam[] {
  const raw = p.targets;
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) throw invalid('targets must be an array of {ref} or {selector}');
  return raw.map((t) => {
    const o = (t ?? {}) as Record<string, unknown>;
    const ref = typeof o.ref === 'string' && o.ref !== '' ? o.ref : undefined;
    const selector = typeof o.selector === 'string' && o.selector !== '' ? o.selector : undefined;
    if ((ref === undefined) === (selector === undefined)) throw invalid('each target needs exactly one of ref or selector');
    return ref !== undefined ? { ref } : { selector: selector as string };
  });
}

export async function requestHelp(p: Params, ctx: PageContext & { help: HelpRequests }, signal: AbortSignal): Promise<unknown> {
  const session = sessionOf(p, ctx.sessions, 'tool.request_help');
  const prompt = str(p, 'prompt', 'tool.request_help');
  const title = optStr(p, 'title') || DEFAULT_TITLE;
  const timeoutMs = optUint(p, 'timeout_ms', 1) ?? HELP_TIMEOUT_MS;
  const completion = criteriaOf(p);
  const targets = targetsOf(p);
  const tab = await scopedTab(p, session, ctx.sessions);
  refuseRestricted(tab);
  const tabId = tab.id as number;
  checkpoint(signal);
  await focus(tabId);

  // Targets: refs of this tab's last snapshot, or selectors; a ref that does not
  // belong here is reported unmatched rather than failing the request.
  let resolved: { matched: boolean; ref?: string; selector?: string }[] | undefined;
  if (targets.length > 0) {
    const store = session.refs;
    const pageTargets = targets.map((t) => {
      if (t.selector !== undefined) return { selector: t.selector };
      const usable = store && store.tabId === tabId && !store.stale;
      return { ref: refKey(t.ref as string), snapshot: usable ? store.snapshot : '' };
    });
    const { value } = await pageCall<{ matched: boolean[] }>(tabId, 'highlight', { targets: pageTargets }).catch(() => ({
      value: { matched: targets.map(() => false) },
    }));
    resolved = targets.map((t, i) => ({ matched: value.matched[i] === true, ...t }));
  }

  const request = crypto.randomUUID();
  let settle: (outcome: HelpOutcome | Error) => void = () => undefined;
  const decided = new Promise<HelpOutcome | Error>((resolve) => {
    settle = resolve;
  });
  const timer = setTimeout(() => settle('timed_out'), timeoutMs);
  const onAbort = () => settle(new ToolError('cancelled', 'rpc aborted by daemon cancel'));
  signal.addEventListener('abort', onAbort);
  let poller: ReturnType<typeof setInterval> | undefined;
  if (completion) {
    let since: number | undefined;
    let polling = false;
    poller = setInterval(() => {
      if (polling) return;
      polling = true;
      pageCall<{ met: boolean }>(tabId, 'conditions', completion.criteria)
        .then(({ value }) => {
          if (!value.met) since = undefined;
          else if (since === undefined) since = Date.now();
          if (since !== undefined && Date.now() - since >= completion.stableMs) settle('completed');
        })
        .catch((e: unknown) => {
          // Mid-navigation the page cannot answer: not met yet. A bad selector is final.
          since = undefined;
          if (e instanceof ToolError && e.code === 'invalid_params') settle(e);
        })
        .finally(() => {
          polling = false;
        });
    }, HELP_POLL_MS);
  }
  try {
    await ctx.help.add({ request, sessionId: session.id, tabId, title, prompt, answer: (o) => settle(o) });
    const outcome = await decided;
    if (outcome instanceof Error) throw outcome;
    return {
      outcome,
      ...(outcome === 'completed' ? { completed_by: 'system' } : {}),
      tab_id: tabId,
      ...(resolved ? { resolved_targets: resolved } : {}),
    };
  } finally {
    clearTimeout(timer);
    clearInterval(poller);
    signal.removeEventListener('abort', onAbort);
    await ctx.help.remove(request);
    if (targets.length > 0) await pageCall(tabId, 'unhighlight', {}).catch(() => undefined);
  }
}
