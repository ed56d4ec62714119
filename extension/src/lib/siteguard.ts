// Site rules in the agent's tabs (docs/policy.md, "Enforcement in the browser"):
// every main-frame navigation of a tab of an Agent Window, or of a tab a session
// borrowed, is checked against the session's rules, whoever started it: the
// agent, a link, a redirect, window.open, a form post. One the rules refuse is
// stopped on a page of ours that says why, and reported to the gateway as
// `latchkey.site_blocked` (only in a session whose start carried rules, so a
// gateway that does not know the event never receives it).
//
// Requests are seen as they start (webRequest, each redirect hop included) and
// again at commit (webNavigation), the backstop; the first request to a refused
// host may still leave the browser, but its page is replaced before anyone can
// use it.

import { browser } from 'wxt/browser';
import { EVENT_SITE_BLOCKED } from '@protocol/constants';
import type { AgentSession, Sessions } from './sessions';
import { type Refusal, refusal } from './siterules';

/** The same stop reported once, however many events see it. */
const REPEAT_MS = 2_000;

export function blockedPageUrl(r: Refusal): string {
  const q = new URLSearchParams({ host: r.host, reason: r.reason, ...(r.pattern ? { pattern: r.pattern } : {}) });
  return browser.runtime.getURL(`/blocked.html?${q.toString()}`);
}

export class SiteGuard {
  private readonly recent = new Map<string, number>();

  constructor(
    private readonly sessions: Sessions,
    private readonly report: (event: string, payload: Record<string, unknown>) => void,
  ) {}

  install(): void {
    browser.webRequest?.onBeforeRequest.addListener(
      (d) => {
        if (d.tabId >= 0 && d.frameId === 0) void this.check(d.tabId, d.url);
        return undefined;
      },
      { urls: ['<all_urls>'], types: ['main_frame'] },
    );
    browser.webNavigation.onBeforeNavigate.addListener((d) => {
      if (d.frameId === 0) void this.check(d.tabId, d.url);
    });
    browser.webNavigation.onCommitted.addListener((d) => {
      if (d.frameId === 0) void this.check(d.tabId, d.url);
    });
  }

  /** The session whose rules govern `tabId`, if any. */
  private async sessionOf(tabId: number): Promise<AgentSession | undefined> {
    const borrower = this.sessions.borrowerOf(tabId);
    if (borrower) return borrower;
    const tab = await browser.tabs.get(tabId).catch(() => undefined);
    return tab?.windowId === undefined ? undefined : this.sessions.byWindow(tab.windowId);
  }

  /** Stop `tabId` if its session's rules refuse `url`. */
  async check(tabId: number, url: string): Promise<void> {
    if (this.sessions.size === 0) return;
    const session = await this.sessionOf(tabId);
    if (!session?.rules) return;
    const own = new URL(browser.runtime.getURL('/')).origin;
    const refused = refusal(session.rules, url, own);
    if (!refused) return;
    await browser.tabs.update(tabId, { url: blockedPageUrl(refused) }).catch(() => undefined);
    const key = `${session.id}|${tabId}|${refused.host}`;
    const now = Date.now();
    for (const [k, at] of this.recent) if (now - at > REPEAT_MS) this.recent.delete(k);
    if (this.recent.has(key)) return;
    this.recent.set(key, now);
    this.report(EVENT_SITE_BLOCKED, {
      session_id: session.id,
      tab_id: tabId,
      host: refused.host,
      reason: refused.reason,
      ...(refused.pattern ? { pattern: refused.pattern } : {}),
    });
  }
}
