// Tab tools (docs/protocol.md, "Tools"): list, create, close, select, and return of borrowed tabs.

import { browser } from 'wxt/browser';
import { invalid, notFound, ToolError } from '../errors';
import type { Params } from '../dispatcher';
import type { AgentSession, Sessions } from '../sessions';
import { id, optBool, optStr, optUint, sessionOf } from './params';
import { agentCreates, personWindow } from '../tabowner';

export async function tabList(p: Params, sessions: Sessions): Promise<unknown> {
  const session = sessionOf(p, sessions, 'tool.tab_list');
  const scope = optStr(p, 'scope') ?? 'all';
  if (!['user', 'agent', 'all'].includes(scope)) throw invalid('scope must be user, agent or all');
  const tabs = await browser.tabs.query({});
  const out = [];
  for (const t of tabs) {
    if (t.id === undefined) continue;
    const mine = t.windowId === session.windowId;
    // Other sessions' Agent Windows are never listed.
    if (!mine && sessions.isAgentWindow(t.windowId)) continue;
    const tabScope = mine ? 'agent' : 'user';
    if (scope !== 'all' && scope !== tabScope) continue;
    out.push({
      tab_id: t.id,
      ...(t.title !== undefined ? { title: t.title } : {}),
      ...(t.url !== undefined ? { url: t.url } : {}),
      window_id: t.windowId,
      active: t.active,
      scope: tabScope,
    });
  }
  return { tabs: out };
}

export async function tabCreate(p: Params, sessions: Sessions): Promise<unknown> {
  const session = sessionOf(p, sessions, 'tool.tab_create');
  const url = optStr(p, 'url') ?? 'chrome://newtab/';
  const active = optBool(p, 'active', true);
  const index = optUint(p, 'index');
  const tab = await agentCreates(session, () =>
    browser.tabs.create({ windowId: session.windowId, url, active, ...(index !== undefined ? { index } : {}) }) as Promise<chrome.tabs.Tab>,
  );
  return { tab_id: tab.id, window_id: session.windowId, url: tab.url || tab.pendingUrl || '' };
}

/** A tab of this session's Agent Window, or the contract's refusal. */
async function ownTab(session: AgentSession, sessions: Sessions, tabId: number): Promise<chrome.tabs.Tab> {
  let tab: chrome.tabs.Tab;
  try {
    tab = (await browser.tabs.get(tabId)) as chrome.tabs.Tab;
  } catch {
    throw notFound(`tab ${tabId} not found`);
  }
  const borrower = sessions.borrowerOf(tabId);
  if (borrower && borrower.id !== session.id) {
    throw ToolError.reason('permission_denied', `tab ${tabId} is borrowed by another session`, 'borrow_conflict');
  }
  if (tab.windowId !== session.windowId) {
    if (sessions.isAgentWindow(tab.windowId)) throw notFound(`tab ${tabId} not found`);
    throw ToolError.reason('permission_denied', `tab ${tabId} is outside this session's Agent Window`, 'agent_window_scope');
  }
  return tab;
}

export async function tabClose(p: Params, sessions: Sessions): Promise<unknown> {
  const session = sessionOf(p, sessions, 'tool.tab_close');
  const tabId = id(p, 'tab_id', 'tool.tab_close');
  await ownTab(session, sessions, tabId);
  if (session.borrowed.has(tabId)) throw invalid(`tab ${tabId} is borrowed; return it instead of closing it`);
  await browser.tabs.remove(tabId);
  return { tab_id: tabId };
}

export async function tabSelect(p: Params, sessions: Sessions): Promise<unknown> {
  const session = sessionOf(p, sessions, 'tool.tab_select');
  const tabId = id(p, 'tab_id', 'tool.tab_select');
  await ownTab(session, sessions, tabId);
  await browser.tabs.update(tabId, { active: true });
  return { tab_id: tabId, window_id: session.windowId };
}

/**
 * Move a borrowed tab back to where it was; if that window is gone, to the
 * last-focused window of the person's (index -1), or else to a new window of its
 * own (index 0) (docs/protocol.md, "Tools").
 */
export async function returnTab(session: AgentSession, tabId: number, sessions?: Sessions): Promise<{ windowId: number; index: number; fallback: boolean }> {
  const origin = session.borrowed.get(tabId);
  if (!origin) throw notFound(`tab ${tabId} was not borrowed by this session`);
  let windowId = origin.originalWindowId;
  let index = origin.originalIndex;
  let fallback = false;
  try {
    await browser.windows.get(windowId);
  } catch {
    fallback = true;
    const theirs = sessions ? await personWindow(sessions) : undefined;
    if (theirs !== undefined) {
      windowId = theirs;
      index = -1;
    } else {
      const win = await browser.windows.create({ tabId, focused: false });
      session.borrowed.delete(tabId);
      return { windowId: win?.id ?? windowId, index: 0, fallback };
    }
  }
  await browser.tabs.move(tabId, { windowId, index });
  session.borrowed.delete(tabId);
  return { windowId, index, fallback };
}

export async function tabReturn(p: Params, sessions: Sessions): Promise<unknown> {
  const session = sessionOf(p, sessions, 'tool.tab_return');
  const tabId = id(p, 'tab_id', 'tool.tab_return');
  const r = await returnTab(session, tabId, sessions);
  return { tab_id: tabId, returned_to_window_id: r.windowId, returned_to_index: r.index, ...(r.fallback ? { fallback: true } : {}) };
}
