// The person-facing UI in Agent Window pages (entrypoints/agent-banner.ts): the
// mark with its Stop button on every page an Agent Window loads (and on a tab the
// moment it is borrowed), and request_help's panel.

import { browser } from 'wxt/browser';
import { BANNER_FILE, PAGE_UI_GLOBAL } from './page/global';
import { isRestricted } from './tools/params';

export interface HelpPanel {
  request: string;
  title: string;
  prompt: string;
}

type UiOp = 'show' | 'help' | 'endHelp';

/** Run one UI operation in the tab's top frame; false when the page takes no scripts. */
async function pageUi(tabId: number, op: UiOp, arg: unknown): Promise<boolean> {
  try {
    const tab = await browser.tabs.get(tabId);
    const url = tab.url ?? '';
    // Blank and browser pages take no scripts; there is nothing of the page to mark.
    if (url === '' || url === 'about:blank' || isRestricted(url)) return false;
    const target = { tabId, frameIds: [0] };
    await browser.scripting.executeScript({ target, files: [BANNER_FILE] });
    const [r] = await browser.scripting.executeScript({
      target,
      func: (global: string, name: string, a: unknown) =>
        (globalThis as unknown as Record<string, Record<string, (x: unknown) => boolean> | undefined>)[global]?.[name]?.(a) ?? false,
      args: [PAGE_UI_GLOBAL, op, arg],
    });
    return r?.result === true;
  } catch {
    // The tab closed or navigated meanwhile: the next page load shows it.
    return false;
  }
}

export async function showBanner(tabId: number, server: string, interrupted = false): Promise<void> {
  await pageUi(tabId, 'show', { server, interrupted });
}

/** The help panel, with the mark (the panel lives in the mark's shadow root). */
export async function showHelpPanel(tabId: number, server: string, panel: HelpPanel): Promise<boolean> {
  await showBanner(tabId, server);
  return pageUi(tabId, 'help', panel);
}

export async function endHelpPanel(tabId: number): Promise<void> {
  await pageUi(tabId, 'endHelp', null);
}
