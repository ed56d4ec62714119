// Navigation and waits (docs/protocol.md, "Tools"), on chrome.webNavigation events of the main
// frame: commit → onCommitted, domcontentloaded → onDOMContentLoaded, load → onCompleted,
// networkidle → load plus a quiet period. A lifecycle timeout is a success with `reached:
// "timeout"`.

import { browser } from 'wxt/browser';
import { invalid, ToolError } from '../errors';
import { checkpoint, type Params } from '../dispatcher';
import type { Sessions } from '../sessions';
import { optBool, optStr, optUint, scopedTab, sessionOf, str } from './params';

export type Phase = 'commit' | 'domcontentloaded' | 'load' | 'networkidle';
const ORDER: Phase[] = ['commit', 'domcontentloaded', 'load', 'networkidle'];
const NETWORK_IDLE_QUIET_MS = 500;

export function phaseOf(p: Params): Phase {
  const v = optStr(p, 'wait_until') ?? 'load';
  if (!(ORDER as string[]).includes(v)) throw invalid('wait_until must be load, domcontentloaded, networkidle or commit');
  return v as Phase;
}

function timeoutOf(p: Params, fallback: number): number {
  return optUint(p, 'timeout_ms', 1) ?? fallback;
}

/** How often a wait for a phase the tab may already have reached looks again. */
const ALREADY_THERE_POLL_MS = 250;

interface Reached {
  reached: Phase | 'timeout';
  error_text?: string;
}

/** `url` as the browser writes it (`https://a.test` → `https://a.test/`). */
function normalised(url: string): string {
  try {
    return new URL(url).href;
  } catch {
    return url;
  }
}

/**
 * Resolve when the tab's main frame reaches `phase` (after `trigger` runs). Events
 * stamped before the trigger are late news of an earlier load (the Agent Window's
 * first about:blank, say) and are ignored; with `ownNavigation` the phases after
 * commit count only once the triggered navigation has committed. Given the
 * `targetUrl` it was sent to, an abort of another URL before our commit is the
 * earlier navigation ours replaced, and is not our failure.
 */
export function waitForPhase(
  tabId: number,
  phase: Phase,
  timeoutMs: number,
  signal: AbortSignal,
  trigger: () => Promise<unknown>,
  ownNavigation = true,
  alreadyThere?: () => Promise<boolean>,
  targetUrl?: string,
): Promise<Reached> {
  return new Promise((resolve, reject) => {
    let done = false;
    const started = Date.now();
    let committed = !ownNavigation;
    const target = ORDER.indexOf(phase === 'networkidle' ? 'load' : phase);
    const finish = (r: Reached | Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      browser.webNavigation.onCommitted.removeListener(onCommitted);
      browser.webNavigation.onDOMContentLoaded.removeListener(onDom);
      browser.webNavigation.onCompleted.removeListener(onCompleted);
      browser.webNavigation.onErrorOccurred.removeListener(onError);
      signal.removeEventListener('abort', onAbort);
      if (r instanceof Error) reject(r);
      else resolve(r);
    };
    const reached = (p: Phase) => {
      if (p === 'commit') committed = true;
      if (!committed || ORDER.indexOf(p) < target) return;
      if (phase === 'networkidle') {
        setTimeout(() => finish({ reached: 'networkidle' }), NETWORK_IDLE_QUIET_MS);
      } else {
        finish({ reached: phase });
      }
    };
    // `timeStamp`: when the browser saw it, ms since the epoch like Date.now().
    const main = (d: { tabId: number; frameId: number; timeStamp?: number }) =>
      d.tabId === tabId && d.frameId === 0 && (d.timeStamp === undefined || d.timeStamp >= started - 1);
    type Nav = { tabId: number; frameId: number; timeStamp?: number };
    const onCommitted = (d: Nav) => main(d) && reached('commit');
    const onDom = (d: Nav) => main(d) && reached('domcontentloaded');
    const onCompleted = (d: Nav) => main(d) && reached('load');
    const wanted = targetUrl === undefined ? undefined : normalised(targetUrl);
    const onError = (d: Nav & { error: string; url?: string }) => {
      if (!main(d)) return;
      // Our navigation aborts the one the tab was still making (the Agent
      // Window's own page loading when a navigate follows session_start at
      // once): that abort is the earlier navigation's, not ours.
      const superseded = !committed && wanted !== undefined && d.error === 'net::ERR_ABORTED' && d.url !== undefined && normalised(d.url) !== wanted;
      if (!superseded) finish(new ToolError('cdp_failed', `Page.navigate rejected: ${d.error}`));
    };
    const onAbort = () => finish(new ToolError('cancelled', 'rpc aborted by daemon cancel'));
    const timer = setTimeout(() => finish({ reached: 'timeout', error_text: `${phase} not reached within ${timeoutMs} ms` }), timeoutMs);
    browser.webNavigation.onCommitted.addListener(onCommitted);
    browser.webNavigation.onDOMContentLoaded.addListener(onDom);
    browser.webNavigation.onCompleted.addListener(onCompleted);
    browser.webNavigation.onErrorOccurred.addListener(onError);
    signal.addEventListener('abort', onAbort);
    trigger().catch((e: unknown) => finish(e instanceof Error ? e : new Error(String(e))));
    // Checked only once the listeners are in place, and again every
    // ALREADY_THERE_POLL_MS until done: a load that completes between an earlier
    // check and the listeners, or whose event is stamped just before `started`
    // while the tab's status still said loading, would otherwise be missed and the
    // wait would run to its timeout (seen in CI, twice).
    if (alreadyThere) {
      const check = () => {
        if (done) return;
        alreadyThere()
          .then((yes) => {
            if (yes) finish({ reached: phase });
            else if (!done) setTimeout(check, ALREADY_THERE_POLL_MS);
          })
          .catch(() => undefined);
      };
      check();
    }
  });
}

export async function navigate(p: Params, sessions: Sessions, signal: AbortSignal): Promise<unknown> {
  const session = sessionOf(p, sessions, 'tool.navigate');
  const url = str(p, 'url', 'tool.navigate');
  const phase = phaseOf(p);
  const tab = await scopedTab(p, session, sessions);
  checkpoint(signal);
  const tabId = tab.id as number;
  const r = await waitForPhase(tabId, phase, timeoutOf(p, 30_000), signal, () => browser.tabs.update(tabId, { url }), true, undefined, url);
  const after = await browser.tabs.get(tabId);
  return { tab_id: tabId, url, ...(after.url ? { final_url: after.url } : {}), ...r };
}

async function step(p: Params, sessions: Sessions, signal: AbortSignal, tool: string, kind: 'back' | 'forward' | 'reload'): Promise<unknown> {
  const session = sessionOf(p, sessions, tool);
  const phase = phaseOf(p);
  const tab = await scopedTab(p, session, sessions);
  const tabId = tab.id as number;
  const previous = tab.url;
  const hard = optBool(p, 'hard', false);
  if (kind !== 'reload') {
    // The page's own history, not the browser UI's: the UI skips entries that were
    // added without a user gesture, which is every entry an agent creates.
    const [probe] = await browser.scripting.executeScript({
      target: { tabId },
      func: (back: boolean) => {
        const nav = (globalThis as unknown as { navigation?: { canGoBack: boolean; canGoForward: boolean } }).navigation;
        return nav ? (back ? nav.canGoBack : nav.canGoForward) : true;
      },
      args: [kind === 'back'],
    });
    if (probe?.result !== true) throw invalid('no history entry to move to');
  }
  const trigger = async () => {
    if (kind === 'reload') {
      await browser.tabs.reload(tabId, { bypassCache: hard });
      return;
    }
    await browser.scripting.executeScript({
      target: { tabId },
      func: (back: boolean) => (back ? history.back() : history.forward()),
      args: [kind === 'back'],
    });
  };
  const r = await waitForPhase(tabId, phase, timeoutOf(p, 15_000), signal, trigger);
  const after = await browser.tabs.get(tabId);
  return {
    tab_id: tabId,
    ...(previous ? { previous_url: previous } : {}),
    ...(after.url ? { final_url: after.url } : {}),
    ...r,
  };
}

export const navigateBack = (p: Params, s: Sessions, signal: AbortSignal) => step(p, s, signal, 'tool.navigate_back', 'back');
export const navigateForward = (p: Params, s: Sessions, signal: AbortSignal) => step(p, s, signal, 'tool.navigate_forward', 'forward');
export const reload = (p: Params, s: Sessions, signal: AbortSignal) => step(p, s, signal, 'tool.reload', 'reload');

export async function waitForNavigation(p: Params, sessions: Sessions, signal: AbortSignal): Promise<unknown> {
  const session = sessionOf(p, sessions, 'tool.wait_for_navigation');
  const phase = phaseOf(p);
  const tab = await scopedTab(p, session, sessions);
  const tabId = tab.id as number;
  // Already there (docs/protocol.md, "Tools"): a loaded page has passed every phase up to load.
  const loaded = async () => phase !== 'networkidle' && (await browser.tabs.get(tabId)).status === 'complete';
  const r = await waitForPhase(tabId, phase, timeoutOf(p, 30_000), signal, async () => undefined, false, loaded);
  return { tab_id: tabId, ...r };
}
