// Whose tab is it (docs/extension.md, "Agent Windows")? A tab in an Agent Window
// is the agent's only if the agent made it: the window's first tab, one made by
// tool.tab_create, one a page of the agent's opened (window.open, a link with a
// target), or one the person lent (tab_borrow). A tab the person opens while the
// Agent Window has focus, or drags into it, is moved to a window of theirs: it
// never becomes an agent tab, and closing the Agent Window (Stop, the kill
// switch) never closes it.

import { browser } from 'wxt/browser';
import type { AgentSession, Sessions } from './sessions';

/** Creations in flight per session: a tab they make may be reported before the call returns. */
const creating = new WeakMap<AgentSession, Set<Promise<unknown>>>();

/** Run the agent's `create`, counting the tab it makes as the agent's. */
export async function agentCreates(session: AgentSession, create: () => Promise<chrome.tabs.Tab>): Promise<chrome.tabs.Tab> {
  const running = create().then((tab) => {
    if (tab.id !== undefined) session.agentTabs.add(tab.id);
    return tab;
  });
  const set = creating.get(session) ?? new Set();
  creating.set(session, set);
  set.add(running);
  try {
    return await running;
  } finally {
    set.delete(running);
  }
}

/** The window the person was last in that is not an Agent Window, if any. */
export async function personWindow(sessions: Sessions): Promise<number | undefined> {
  const windows = await browser.windows.getAll({ windowTypes: ['normal'] });
  const theirs = windows.filter((w) => w.id !== undefined && !sessions.isAgentWindow(w.id));
  return (theirs.find((w) => w.focused) ?? theirs.at(-1))?.id;
}

/**
 * A tab appeared in `windowId` (created there, or moved in). If that is an Agent
 * Window and the tab is not the agent's, move it out, to the front of the person's
 * window. Returns whether the tab stays (it is the agent's, or no Agent Window's).
 */
export async function claimOrEvict(sessions: Sessions, tab: { id?: number; windowId: number; openerTabId?: number }): Promise<boolean> {
  const session = sessions.byWindow(tab.windowId);
  if (!session || tab.id === undefined) return true;
  const id = tab.id;
  const known = () => sessions.isAgentTab(session, id);
  if (known()) return true;
  if (tab.openerTabId !== undefined && sessions.isAgentTab(session, tab.openerTabId)) {
    session.agentTabs.add(id);
    return true;
  }
  // A tab_create may not have returned yet.
  await Promise.allSettled([...(creating.get(session) ?? [])]);
  if (known() || sessions.get(session.id) !== session) return true;
  try {
    const target = await personWindow(sessions);
    if (target !== undefined) {
      await browser.tabs.move(id, { windowId: target, index: -1 });
      await browser.tabs.update(id, { active: true });
      await browser.windows.update(target, { focused: true });
    } else {
      await browser.windows.create({ tabId: id, focused: true });
    }
  } catch {
    // Closed meanwhile: nothing to move.
  }
  return false;
}
