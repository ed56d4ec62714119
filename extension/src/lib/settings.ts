// The person's settings for this browser, in storage.local (not synced: they
// describe this machine). Every setting defaults to the safe choice.

import { browser } from 'wxt/browser';
import { BORROW_CONFIRM_MS } from '@protocol/constants';

export interface Settings {
  /** Whether agents may run JavaScript in Agent Window pages (tool.evaluate). Off by default. */
  allowEvaluate: boolean;
  /** How long a borrow confirmation waits for an answer before it counts as no (s). */
  borrowWaitSeconds: number;
}

const KEY = 'latchkey.settings';
export const BORROW_WAIT_MIN_S = 10;
export const BORROW_WAIT_MAX_S = 300;
export const DEFAULT_SETTINGS: Settings = { allowEvaluate: false, borrowWaitSeconds: BORROW_CONFIRM_MS / 1000 };

/** A wait in range, or the default. */
function borrowWait(v: unknown): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= BORROW_WAIT_MIN_S && v <= BORROW_WAIT_MAX_S
    ? v
    : DEFAULT_SETTINGS.borrowWaitSeconds;
}

export async function loadSettings(): Promise<Settings> {
  const stored = (await browser.storage.local.get(KEY))[KEY] as Partial<Settings> | undefined;
  return { allowEvaluate: stored?.allowEvaluate === true, borrowWaitSeconds: borrowWait(stored?.borrowWaitSeconds) };
}

export async function saveSettings(patch: Partial<Settings>): Promise<Settings> {
  const current = await loadSettings();
  const next: Settings = {
    allowEvaluate: typeof patch.allowEvaluate === 'boolean' ? patch.allowEvaluate : current.allowEvaluate,
    borrowWaitSeconds: patch.borrowWaitSeconds === undefined ? current.borrowWaitSeconds : borrowWait(patch.borrowWaitSeconds),
  };
  await browser.storage.local.set({ [KEY]: next });
  return next;
}
