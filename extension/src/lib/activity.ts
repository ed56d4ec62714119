// What agents did in this browser, for the person: the last 200 tool calls with
// method, session, tab, outcome and time. Metadata only — never parameters, typed
// values, selectors, URLs or page content — so the list itself holds nothing an
// agent was told or saw. Kept in storage.local so that it survives the service
// worker sleeping; the person can clear it.

import { browser } from 'wxt/browser';

export interface ActivityEntry {
  /** Epoch ms when the call finished. */
  at: number;
  method: string;
  session?: string;
  tab?: number;
  /** `ok`, or the error code. */
  outcome: string;
  /** Why the gateway stopped the session (`tool.session_stop` from a gateway that says). */
  reason?: string;
}

export const ACTIVITY_LIMIT = 200;
const KEY = 'latchkey.activity';
const SAVE_DELAY_MS = 250;

function tabOf(params: Record<string, unknown>, result: unknown): number | undefined {
  const fromParams = params.tab_id;
  if (typeof fromParams === 'number' && Number.isSafeInteger(fromParams)) return fromParams;
  const fromResult = (result as { tab_id?: unknown } | null | undefined)?.tab_id;
  return typeof fromResult === 'number' && Number.isSafeInteger(fromResult) ? fromResult : undefined;
}

export class ActivityLog {
  private entries: ActivityEntry[] = [];
  private loaded: Promise<void> | undefined;
  private saveTimer: ReturnType<typeof setTimeout> | undefined;

  private load(): Promise<void> {
    this.loaded ??= browser.storage.local.get(KEY).then((got) => {
      const stored = got[KEY];
      // Entries recorded before the stored list was read come after it.
      if (Array.isArray(stored)) this.entries = [...(stored as ActivityEntry[]), ...this.entries].slice(-ACTIVITY_LIMIT);
    });
    return this.loaded;
  }

  /** Record one finished tool call (only `tool.*` methods are people's business). */
  record(method: string, params: Record<string, unknown>, outcome: { result?: unknown; error?: { code: string } }, at = Date.now()): void {
    if (!method.startsWith('tool.')) return;
    const session = typeof params.session_id === 'string' ? params.session_id.slice(0, 64) : undefined;
    const tab = tabOf(params, outcome.result);
    // A stable reason name only: nothing a gateway writes is shown as it came.
    const reason = method === 'tool.session_stop' && typeof params.reason === 'string' && /^[a-z_]{1,40}$/.test(params.reason) ? params.reason : undefined;
    this.entries.push({
      at,
      method,
      ...(session ? { session } : {}),
      ...(tab !== undefined ? { tab } : {}),
      outcome: outcome.error ? outcome.error.code : 'ok',
      ...(reason ? { reason } : {}),
    });
    if (this.entries.length > ACTIVITY_LIMIT) this.entries.splice(0, this.entries.length - ACTIVITY_LIMIT);
    clearTimeout(this.saveTimer);
    this.saveTimer = setTimeout(() => void this.save(), SAVE_DELAY_MS);
  }

  private async save(): Promise<void> {
    await this.load();
    await browser.storage.local.set({ [KEY]: this.entries });
  }

  /** Newest first. */
  async list(): Promise<ActivityEntry[]> {
    await this.load();
    return [...this.entries].reverse();
  }

  async clear(): Promise<void> {
    await this.load();
    clearTimeout(this.saveTimer);
    this.entries = [];
    await browser.storage.local.remove(KEY);
  }

  /** Write now (tests; the worker going idle loses at most the last 250 ms otherwise). */
  async flush(): Promise<void> {
    clearTimeout(this.saveTimer);
    await this.save();
  }
}
