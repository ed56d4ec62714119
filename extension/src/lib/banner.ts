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

type UiOp = 'show' | 'help' | 'endHelp' | 'hideForCapture' | 'reveal';

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

/** The longest a screenshot keeps the page's mark hidden if its end is never seen. */
const CAPTURE_HIDE_MS = 5_000;

/**
 * `capture` run with the page's mark and help panel hidden, so that the screenshot
 * shows the page as it is (docs/protocol.md, "Observation"); they are back as soon
 * as it is taken, or after CAPTURE_HIDE_MS at the latest.
 */
export async function withoutOverlays<T>(tabId: number, capture: () => Promise<T>): Promise<T> {
  await pageUi(tabId, 'hideForCapture', CAPTURE_HIDE_MS);
  try {
    return await capture();
  } finally {
    await pageUi(tabId, 'reveal', null);
  }
}
