// tool.snapshot and tool.observe (docs/protocol.md, "Tools"): the page as text with refs.
// Each call replaces the session's ref store; the store remembers the tab, the document
// and the snapshot, so a ref from an older snapshot, another tab or a previous page fails
// with `ref_not_found` instead of hitting a look-alike.

import { browser } from 'wxt/browser';
import { ToolError } from '../errors';
import { checkpoint, type Params } from '../dispatcher';
import { type Cdp, withDialogs } from '../cdp';
import type { AgentSession, Sessions } from '../sessions';
import { pageCall } from '../page/bridge';
import { isRestricted, optBool, optUint, scopedTab, sessionOf } from './params';

export interface PageContext {
  sessions: Sessions;
  cdp: Cdp;
}

const RESTRICTED_MESSAGE = 'this page cannot be read by extensions';

/**
 * The tab a read acts on. Restricted pages are refused; without an explicit tab_id
 * another readable tab of the Agent Window is used instead (docs/protocol.md, "Tools").
 */
async function readableTab(p: Params, session: AgentSession, sessions: Sessions): Promise<chrome.tabs.Tab> {
  const tab = await scopedTab(p, session, sessions);
  if (!isRestricted(tab.url ?? tab.pendingUrl)) return tab;
  if (p.tab_id === undefined) {
    const others = await browser.tabs.query({ windowId: session.windowId });
    const other = others.find((t) => t.id !== tab.id && !isRestricted(t.url ?? t.pendingUrl));
    if (other) return other as chrome.tabs.Tab;
  }
  throw ToolError.reason('permission_denied', RESTRICTED_MESSAGE, 'restricted_tab_url');
}

async function run(p: Params, ctx: PageContext, signal: AbortSignal, tool: string): Promise<Record<string, unknown>> {
  const session = sessionOf(p, ctx.sessions, tool);
  const maxDepth = optUint(p, 'max_depth');
  const maxTokens = optUint(p, 'max_tokens');
  const tab = await readableTab(p, session, ctx.sessions);
  const tabId = tab.id as number;
  checkpoint(signal);
  const snapshot = crypto.randomUUID();
  if ((tab.url ?? tab.pendingUrl ?? 'about:blank') === 'about:blank') {
    // Nothing to read, and nothing can be injected into a blank page.
    session.refs = { tabId, documentId: undefined, snapshot, count: 0, stale: 'the blank page has no refs' };
    return { text: '- document (about:blank, empty)', ref_count: 0, tab_id: tabId, truncated: false };
  }
  const read = () =>
    pageCall<{ text: string; truncated: boolean; refCount: number }>(tabId, 'snapshot', {
      ...(maxDepth !== undefined ? { maxDepth } : {}),
      ...(maxTokens !== undefined ? { maxTokens } : {}),
      snapshot,
    });
  const answer = ctx.cdp.isAttached(tabId) ? await withDialogs(ctx.cdp, tabId, read) : await read();
  const { value, documentId } = answer;
  session.refs = { tabId, documentId, snapshot, count: value.refCount };
  return {
    text: value.text,
    ref_count: value.refCount,
    tab_id: tabId,
    truncated: value.truncated,
    ...('dialogs' in answer ? { dialogs: answer.dialogs } : {}),
  };
}

export const snapshot = (p: Params, ctx: PageContext, signal: AbortSignal) => run(p, ctx, signal, 'tool.snapshot');

/** The snapshot output; no hover probes are run, so `debug` lists none. */
export async function observe(p: Params, ctx: PageContext, signal: AbortSignal): Promise<unknown> {
  const debugSurfaces = optBool(p, 'debug_surfaces', false);
  const session = sessionOf(p, ctx.sessions, 'tool.observe');
  // Observe follows the Agent Window rule strictly: no fallback to another tab.
  if (p.tab_id !== undefined) await scopedTab(p, session, ctx.sessions);
  const out = await run(p, ctx, signal, 'tool.observe');
  return debugSurfaces ? { ...out, debug: { surface_probes: [] } } : out;
}

/** A navigation of the tab voids its refs. */
export function voidRefsOnNavigation(sessions: Sessions, tabId: number): void {
  for (const s of sessions.all()) {
    if (s.refs?.tabId === tabId) s.refs.stale = 'the page navigated since the snapshot; take a new snapshot';
  }
}

/** Parse a ref (`e4` or `@e4`) to its key without `@`. */
export function refKey(ref: string): string {
  const m = /^@?(e[1-9]\d*)$/.exec(ref);
  if (!m?.[1]) throw ToolError.reason('not_found', `ref ${JSON.stringify(ref)} is not a ref like e4 or @e4`, 'ref_not_found');
  return m[1];
}
