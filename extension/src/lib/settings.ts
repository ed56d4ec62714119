// The person's settings for this browser, in storage.local (not synced: they
// describe this machine). Every setting defaults to the safe choice.

import { browser } from 'wxt/browser';

export interface Settings {
  /** Whether agents may run JavaScript in Agent Window pages (tool.evaluate). Off by default. */
  allowEvaluate: boolean;
}

const KEY = 'latchkey.settings';
export const DEFAULT_SETTINGS: Settings = { allowEvaluate: false };

export async function loadSettings(): Promise<Settings> {
  const stored = (await browser.storage.local.get(KEY))[KEY] as Partial<Settings> | undefined;
  return { allowEvaluate: stored?.allowEvaluate === true };
}

export async function saveSettings(patch: Partial<Settings>): Promise<Settings> {
  const next = { ...(await loadSettings()), ...patch };
  await browser.storage.local.set({ [KEY]: next });
  return next;
}
