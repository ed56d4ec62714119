// The service worker's way into a page: run one operation of the page agent
// (lib/page/agent.ts) in the tab's top frame, installing the agent first if this
// document does not have it yet. A ref's document is targeted by its documentId, so
// after a navigation the call fails instead of reaching a look-alike element.

import { browser } from 'wxt/browser';
import { type ExtensionErrorCode, type Reason, ToolError } from '../errors';
import type { PageError } from './agent';
import { PAGE_AGENT_FILE, PAGE_AGENT_GLOBAL } from './global';

export type PageOp = 'snapshot' | 'locate' | 'hitTest' | 'focus' | 'prepareFill' | 'select' | 'highlight' | 'unhighlight' | 'conditions' | 'html' | 'bounds' | 'checkState';

interface Missing {
  missing: true;
}

export interface PageAnswer<T> {
  value: T;
  documentId: string | undefined;
}

const STALE = 'the page changed since the snapshot (it navigated or reloaded); take a new snapshot';

async function run(tabId: number, documentId: string | undefined, op: PageOp, args: unknown): Promise<{ result: unknown; documentId?: string }> {
  const target = documentId ? { tabId, documentIds: [documentId] } : { tabId, frameIds: [0] };
  const [injection] = await browser.scripting.executeScript({
    target,
    func: (global: string, name: string, a: unknown) => {
      const agent = (globalThis as unknown as Record<string, Record<string, (x: unknown) => unknown> | undefined>)[global];
      if (!agent) return { missing: true };
      return agent[name]?.(a) ?? { error: { code: 'protocol_error', message: `page operation ${name} is unknown` } };
    },
    args: [PAGE_AGENT_GLOBAL, op, args],
  });
  return { result: injection?.result, ...(injection?.documentId ? { documentId: injection.documentId } : {}) };
}

function toError(e: PageError): ToolError {
  const { code, message, reason } = e.error;
  const data = reason ? { reason: reason as Reason } : undefined;
  return new ToolError(code as ExtensionErrorCode, message, data);
}

/** How long a page call waits for a navigation in flight to finish before its retry. */
const NAVIGATION_WAIT_MS = 5_000;

/**
 * Resolve once the tab has finished loading (or after NAVIGATION_WAIT_MS). With
 * `alreadyDone` false a tab that is complete now does not count: the caller is about
 * to start a navigation and waits for its end.
 */
export function loaded(tabId: number, alreadyDone = true): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      browser.tabs.onUpdated.removeListener(onUpdated);
      resolve();
    };
    const onUpdated = (id: number, info: { status?: string }) => {
      if (id === tabId && info.status === 'complete') done();
    };
    const timer = setTimeout(done, NAVIGATION_WAIT_MS);
    browser.tabs.onUpdated.addListener(onUpdated);
    if (!alreadyDone) return;
    void browser.tabs.get(tabId).then(
      (t) => t.status === 'complete' && done(),
      () => done(),
    );
  });
}

/**
 * Resolve once the tab shows `url` and has finished loading it (or after
 * NAVIGATION_WAIT_MS). Unlike `loaded`, a load that completes for the page being
 * replaced does not count: only the committed `url` does.
 */
export function showing(tabId: number, url: string): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      browser.tabs.onUpdated.removeListener(onUpdated);
      resolve();
    };
    const check = (tab: { url?: string; status?: string }) => tab.url === url && tab.status === 'complete' && done();
    const onUpdated = (id: number, _info: unknown, tab: { url?: string; status?: string }) => {
      if (id === tabId) check(tab);
    };
    const timer = setTimeout(done, NAVIGATION_WAIT_MS);
    browser.tabs.onUpdated.addListener(onUpdated);
    void browser.tabs.get(tabId).then(check, () => done());
  });
}

/** Run `op` in the page; page errors become the tool's error. */
export async function pageCall<T>(
  tabId: number,
  op: PageOp,
  args: unknown,
  documentId?: string,
  retried = false,
): Promise<PageAnswer<T>> {
  let answer: { result: unknown; documentId?: string };
  try {
    answer = await run(tabId, documentId, op, args);
    if ((answer.result as Missing | undefined)?.missing) {
      // A document that never had the agent cannot hold a ref.
      if (documentId) throw ToolError.reason('not_found', STALE, 'ref_not_found');
      await browser.scripting.executeScript({ target: { tabId, frameIds: [0] }, files: [PAGE_AGENT_FILE] });
      answer = await run(tabId, documentId, op, args);
    }
  } catch (e) {
    if (e instanceof ToolError) throw e;
    if (documentId) throw ToolError.reason('not_found', STALE, 'ref_not_found');
    const message = e instanceof Error ? e.message : String(e);
    // The page was being replaced (a navigation in flight): once it has loaded, try
    // once more on the new page.
    if (!retried && /frame .*(was removed|not found)|no frame with id|document .* not found/i.test(message)) {
      await loaded(tabId);
      return pageCall<T>(tabId, op, args, documentId, true);
    }
    throw new ToolError('protocol_error', `the page could not be reached: ${message}`);
  }
  const result = answer.result as T | PageError | undefined;
  if (result === undefined || result === null) throw new ToolError('protocol_error', `page operation ${op} gave no answer`);
  if (typeof result === 'object' && 'error' in (result as object)) throw toError(result as PageError);
  return { value: result as T, documentId: answer.documentId };
}
