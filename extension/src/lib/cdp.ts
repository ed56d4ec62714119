// The Chrome debugger protocol on Agent Window tabs: trusted input events,
// `Runtime.evaluate`, and JavaScript dialogs. Attached on first use per tab and detached when
// the session ends or the tab leaves the Agent Window; never attached to the person's own
// tabs.
//
// Dialogs (alert, confirm, prompt, beforeunload) are answered at once so that no page can
// stall an agent: alert and beforeunload accepted, confirm and prompt dismissed (the safe
// answer to "Delete everything?"). Each is recorded per tab with an increasing sequence, for
// the `dialogs` of tool results (docs/protocol.md, "Tools"). A page that opens dialogs in a
// loop is unloaded (the tab goes to about:blank).

import { browser } from 'wxt/browser';
import { ToolError } from './errors';
import { showing } from './page/bridge';

export interface DialogEntry {
  tab_id: number;
  type: 'alert' | 'confirm' | 'prompt' | 'beforeunload';
  message: string;
  url?: string;
  default_prompt?: string;
  has_browser_handler?: boolean;
  handled: 'accepted' | 'dismissed';
  sequence: number;
}

/** Dialogs kept per tab (docs/protocol.md, "Limits"). */
export const DIALOG_BUFFER = 32;
/** This many dialogs within the window is a loop: the page's script is stopped. */
export const DIALOG_LOOP_COUNT = 20;
export const DIALOG_LOOP_WINDOW_MS = 2_000;
const PROTOCOL_VERSION = '1.3';

interface TabState {
  attached: Promise<void>;
  dialogs: DialogEntry[];
  nextSequence: number;
  recent: number[];
  /** Sequence of the dialog at which a loop was stopped, if any. */
  loopStoppedAt?: number;
  /**
   * Set while a looping page is being unloaded: the dialogs it still opens are
   * answered but are not a second loop (which would fail the next action too).
   */
  unloading?: Promise<void>;
  /** Actions waiting on this tab, woken when a dialog loop is stopped. */
  loopWaiters: Set<() => void>;
}

type Listener = (tabId: number, method: string, params: Record<string, unknown>) => void;
/** `byPerson`: the person pressed Cancel on Chrome's "is debugging this browser" bar. */
type DetachListener = (tabId: number, byPerson: boolean) => void;

export class Cdp {
  private readonly tabs = new Map<number, TabState>();
  private readonly listeners: Listener[] = [];
  private readonly detachListeners: DetachListener[] = [];

  constructor() {
    browser.debugger.onEvent.addListener((source, method, params) => {
      if (source.tabId === undefined) return;
      const p = (params ?? {}) as Record<string, unknown>;
      if (method === 'Page.javascriptDialogOpening') void this.onDialog(source.tabId, p);
      for (const l of this.listeners) l(source.tabId, method, p);
    });
    browser.debugger.onDetach.addListener((source, reason) => {
      // Closed tab, or the person cancelled debugging from the infobar: attach again
      // on next use.
      if (source.tabId === undefined) return;
      this.tabs.delete(source.tabId);
      for (const l of this.detachListeners) l(source.tabId, reason === 'canceled_by_user');
    });
  }

  /** Every protocol event from attached tabs (console and network buffers). */
  onEvent(listener: Listener): void {
    this.listeners.push(listener);
  }

  /** Told when a tab is no longer attached (its buffers go). */
  onDetach(listener: DetachListener): void {
    this.detachListeners.push(listener);
  }

  /** Attach to `tabId` if not attached yet. */
  async ensure(tabId: number): Promise<void> {
    let state = this.tabs.get(tabId);
    if (!state) {
      state = { attached: this.attach(tabId), dialogs: [], nextSequence: 1, recent: [], loopWaiters: new Set() };
      this.tabs.set(tabId, state);
      state.attached.catch(() => this.tabs.delete(tabId));
    }
    await state.attached;
  }

  private async attach(tabId: number): Promise<void> {
    try {
      await browser.debugger.attach({ tabId }, PROTOCOL_VERSION);
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      // Already attached by us (a worker restart keeps the attachment): carry on.
      if (!/already attached/i.test(message)) throw new ToolError('cdp_failed', `the debugger could not attach: ${message}`);
    }
    // Page: dialogs. Runtime, Log and Network: the console and network buffers.
    // (Runtime.enable is visible to a page that looks for automation; it is on only
    // in Agent Windows, which say they are automated anyway.)
    for (const domain of ['Page.enable', 'Runtime.enable', 'Log.enable', 'Network.enable']) {
      await browser.debugger.sendCommand({ tabId }, domain);
    }
  }

  async send<T = Record<string, unknown>>(tabId: number, method: string, params: Record<string, unknown> = {}): Promise<T> {
    await this.ensure(tabId);
    try {
      return (await browser.debugger.sendCommand({ tabId }, method, params)) as T;
    } catch (e) {
      throw new ToolError('cdp_failed', `${method} failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  async detach(tabId: number): Promise<void> {
    if (!this.tabs.delete(tabId)) return;
    for (const l of this.detachListeners) l(tabId, false);
    await browser.debugger.detach({ tabId }).catch(() => undefined);
  }

  /** Let go of every tab of a window (an Agent Window that is closing). */
  async detachWindow(windowId: number): Promise<void> {
    const tabs = await browser.tabs.query({ windowId }).catch(() => []);
    await Promise.all(tabs.map((t) => (t.id === undefined ? undefined : this.detach(t.id))));
  }

  isAttached(tabId: number): boolean {
    return this.tabs.has(tabId);
  }

  /** The sequence the next dialog of `tabId` will get: a mark for `dialogsSince`. */
  mark(tabId: number): number {
    return this.tabs.get(tabId)?.nextSequence ?? 1;
  }

  /** `mark` of every attached tab (for a call that has not chosen its tab yet). */
  marks(): Map<number, number> {
    return new Map([...this.tabs].map(([tabId, state]) => [tabId, state.nextSequence]));
  }

  /** Dialogs that appeared since `mark`. */
  dialogsSince(tabId: number, mark: number): DialogEntry[] {
    return (this.tabs.get(tabId)?.dialogs ?? []).filter((d) => d.sequence >= mark);
  }

  /** Call `wake` if a dialog loop is stopped on `tabId`; returns the unsubscribe. */
  whenLoopStopped(tabId: number, wake: () => void): () => void {
    const waiters = this.tabs.get(tabId)?.loopWaiters;
    waiters?.add(wake);
    return () => {
      waiters?.delete(wake);
    };
  }

  /** Whether a dialog loop was stopped since `mark`. */
  loopStoppedSince(tabId: number, mark: number): boolean {
    const at = this.tabs.get(tabId)?.loopStoppedAt;
    return at !== undefined && at >= mark;
  }

  /** Resolves once no looping page of `tabId` is being unloaded. */
  async unloaded(tabId: number): Promise<void> {
    await this.tabs.get(tabId)?.unloading;
  }

  private async onDialog(tabId: number, p: Record<string, unknown>): Promise<void> {
    const state = this.tabs.get(tabId);
    const type = (typeof p.type === 'string' ? p.type : 'alert') as DialogEntry['type'];
    const accept = type === 'alert' || type === 'beforeunload';
    await browser.debugger.sendCommand({ tabId }, 'Page.handleJavaScriptDialog', { accept }).catch(() => undefined);
    if (!state) return;
    const entry: DialogEntry = {
      tab_id: tabId,
      type,
      message: typeof p.message === 'string' ? p.message.slice(0, 4096) : '',
      ...(typeof p.url === 'string' && p.url ? { url: p.url } : {}),
      ...(type === 'prompt' && typeof p.defaultPrompt === 'string' ? { default_prompt: p.defaultPrompt } : {}),
      ...(typeof p.hasBrowserHandler === 'boolean' ? { has_browser_handler: p.hasBrowserHandler } : {}),
      handled: accept ? 'accepted' : 'dismissed',
      sequence: state.nextSequence++,
    };
    state.dialogs.push(entry);
    if (state.dialogs.length > DIALOG_BUFFER) state.dialogs.shift();
    const now = Date.now();
    state.recent = state.recent.filter((t) => now - t < DIALOG_LOOP_WINDOW_MS);
    state.recent.push(now);
    if (state.unloading || state.recent.length < DIALOG_LOOP_COUNT) return;
    state.loopStoppedAt = entry.sequence;
    state.unloading = this.unload(tabId);
    await state.unloading;
    state.unloading = undefined;
    state.recent = [];
    for (const wake of state.loopWaiters) wake();
  }

  /**
   * Extensions may not terminate a page's script (Runtime.terminateExecution is
   * refused to them): unload the page instead. Resolves once the tab shows the blank
   * page, so that the failed action's answer is true when the agent reads it and its
   * next call finds the blank page rather than the one being replaced.
   */
  private async unload(tabId: number): Promise<void> {
    const blank = showing(tabId, 'about:blank');
    await browser.tabs.update(tabId, { url: 'about:blank' }).catch(() => undefined);
    await blank;
  }
}

/**
 * Run `action` on `tabId` and add the dialogs it caused to its result (+D). A page
 * that opens dialogs in a loop meanwhile makes it an error at once (the action may
 * be stuck behind the dialogs), after the page was unloaded.
 */
export async function withDialogs<T extends object>(cdp: Cdp, tabId: number, action: () => Promise<T>): Promise<T & { dialogs?: DialogEntry[] }> {
  const mark = cdp.mark(tabId);
  const loopError = () =>
    new ToolError(
      'cdp_failed',
      `the page opened ${DIALOG_LOOP_COUNT} dialogs within ${DIALOG_LOOP_WINDOW_MS} ms and was unloaded (the tab now shows about:blank); the session is still usable`,
    );
  let unsubscribe: () => void = () => undefined;
  const loop = new Promise<never>((_resolve, reject) => {
    unsubscribe = cdp.whenLoopStopped(tabId, () => reject(loopError()));
  });
  loop.catch(() => undefined);
  const work = action();
  work.catch(() => undefined);
  let result: T;
  try {
    result = await Promise.race([work, loop]);
  } finally {
    unsubscribe();
  }
  if (cdp.loopStoppedSince(tabId, mark)) {
    await cdp.unloaded(tabId);
    throw loopError();
  }
  const dialogs = cdp.dialogsSince(tabId, mark);
  return dialogs.length > 0 ? { ...result, dialogs } : result;
}

/**
 * `handler` with the dialogs of its call in its result (+D), for tools that find
 * their tab themselves (navigation, HTML, screenshots): the result's `tab_id` says
 * which tab's dialogs to report.
 */
export function reportingDialogs<A extends unknown[]>(cdp: Cdp, handler: (...args: A) => Promise<unknown>) {
  return async (...args: A): Promise<unknown> => {
    const marks = cdp.marks();
    const result = await handler(...args);
    const r = result as { tab_id?: unknown; dialogs?: unknown } | null;
    if (!r || typeof r.tab_id !== 'number' || r.dialogs !== undefined) return result;
    const dialogs = cdp.dialogsSince(r.tab_id, marks.get(r.tab_id) ?? 1);
    return dialogs.length > 0 ? { ...r, dialogs } : result;
  };
}
