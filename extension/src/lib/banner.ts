// The person-facing UI in Agent Window pages (entrypoints/agent-banner.ts): the
// mark naming the agent, with Stop and Interrupt, on every page an Agent Window
// loads (and on a tab the moment it is borrowed), and request_help's panel.

import { browser } from 'wxt/browser';
import { BANNER_FILE, PAGE_UI_GLOBAL } from './page/global';
import { isRestricted } from './tools/params';

/** What the mark says: who drives the window and since when. */
export interface BannerMark {
  /** "Booker (Travel team)", or "An agent from <server>". */
  agent: string;
  /** When the session started (ms since the epoch). */
  since: number;
  /** The person interrupted the agent's current action. */
  interrupted?: boolean;
}

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

export async function showBanner(tabId: number, mark: BannerMark): Promise<void> {
  await pageUi(tabId, 'show', mark);
}

/** The help panel, with the mark (the panel lives in the mark's shadow root). */
export async function showHelpPanel(tabId: number, mark: BannerMark, panel: HelpPanel): Promise<boolean> {
  await showBanner(tabId, mark);
  return pageUi(tabId, 'help', panel);
}

export async function endHelpPanel(tabId: number): Promise<void> {
  await pageUi(tabId, 'endHelp', null);
}
