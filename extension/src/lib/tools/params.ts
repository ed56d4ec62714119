// Parameter checks shared by the tools (docs/protocol.md, "Tools").

import { invalid, notFound, ToolError } from '../errors';
import type { Params } from '../dispatcher';
import type { AgentSession, Sessions } from '../sessions';
import { browser } from 'wxt/browser';

export function str(p: Params, key: string, tool: string): string {
  const v = p[key];
  if (typeof v !== 'string' || v === '') throw invalid(`${tool} requires ${key}`);
  return v;
}

export function optStr(p: Params, key: string): string | undefined {
  const v = p[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw invalid(`${key} must be a string`);
  return v;
}

export function optBool(p: Params, key: string, fallback: boolean): boolean {
  const v = p[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw invalid(`${key} must be a boolean`);
  return v;
}

/** An optional positive safe integer (tab ids, window ids). */
export function optId(p: Params, key: string): number | undefined {
  const v = p[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v <= 0) throw invalid(`${key} must be a positive integer`);
  return v;
}

export function id(p: Params, key: string, tool: string): number {
  const v = optId(p, key);
  if (v === undefined) throw invalid(`${tool} requires ${key}`);
  return v;
}

export function optUint(p: Params, key: string, min = 0): number | undefined {
  const v = p[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > 4_294_967_295) {
    throw invalid(`${key} must be an integer >= ${min}`);
  }
  return v;
}

/** The session named by `session_id`, or `not_found`. */
export function sessionOf(p: Params, sessions: Sessions, tool: string): AgentSession {
  const sid = str(p, 'session_id', tool);
  const s = sessions.get(sid);
  if (!s) throw notFound(`session ${sid} not found`);
  if (s.ending) throw notFound(`session ${sid} was ended by the person`);
  return s;
}

/**
 * The tab a tool acts on: `tab_id` or the AW's active tab. Tabs in another
 * session's AW are invisible (`not_found`); the person's own tabs are out of
 * scope (`permission_denied` / `agent_window_scope`).
 */
export async function scopedTab(p: Params, session: AgentSession, sessions: Sessions): Promise<chrome.tabs.Tab> {
  const tabId = optId(p, 'tab_id');
  if (tabId === undefined) {
    const [active] = await browser.tabs.query({ windowId: session.windowId, active: true });
    if (!active?.id) throw notFound('the Agent Window has no active tab');
    return active as chrome.tabs.Tab;
  }
  let tab: chrome.tabs.Tab;
  try {
    tab = (await browser.tabs.get(tabId)) as chrome.tabs.Tab;
  } catch {
    throw notFound(`tab ${tabId} not found`);
  }
  if (tab.windowId === session.windowId) return tab;
  if (sessions.isAgentWindow(tab.windowId)) throw notFound(`tab ${tabId} not found`);
  throw ToolError.reason('permission_denied', `tab ${tabId} is outside this session's Agent Window; borrow it first`, 'agent_window_scope');
}

const RESTRICTED = ['chrome:', 'chrome-extension:', 'devtools:', 'edge:', 'brave:', 'vivaldi:', 'opera:'];

/** Pages no tool may read (docs/protocol.md, "Tools"). */
export function isRestricted(url: string | undefined): boolean {
  if (!url) return false;
  if (url.startsWith('about:')) return url !== 'about:blank';
  return RESTRICTED.some((s) => url.startsWith(s));
}

export function refuseRestricted(tab: chrome.tabs.Tab): void {
  if (isRestricted(tab.url ?? tab.pendingUrl)) {
    throw ToolError.reason('permission_denied', 'this page cannot be read by extensions', 'restricted_tab_url');
  }
}
