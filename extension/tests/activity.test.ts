import { beforeEach, describe, expect, it } from 'vitest';
import { fakeBrowser } from 'wxt/testing';
import { ACTIVITY_LIMIT, ActivityLog } from '../src/lib/activity';

describe('activity list', () => {
  beforeEach(() => fakeBrowser.reset());

  it('keeps metadata only: method, session, tab, outcome, time', async () => {
    const log = new ActivityLog();
    log.record('tool.fill', { session_id: 'abcd', tab_id: 7, ref: 'e3', value: 'hunter2' }, { result: { tab_id: 7, value_length: 7 } }, 1000);
    log.record('tool.click', { session_id: 'abcd', selector: '#secret-button' }, { error: { code: 'user_aborted' } }, 2000);
    log.record('tool.snapshot', { session_id: 'abcd' }, { result: { tab_id: 9, text: 'page text with a password' } }, 3000);
    log.record('system.handshake', {}, { result: {} }, 4000);
    await log.flush();
    const entries = await log.list();
    expect(entries).toEqual([
      { at: 3000, method: 'tool.snapshot', session: 'abcd', tab: 9, outcome: 'ok' },
      { at: 2000, method: 'tool.click', session: 'abcd', outcome: 'user_aborted' },
      { at: 1000, method: 'tool.fill', session: 'abcd', tab: 7, outcome: 'ok' },
    ]);
    const stored = JSON.stringify(await fakeBrowser.storage.local.get(null));
    for (const secret of ['hunter2', 'secret-button', 'page text', 'e3']) expect(stored).not.toContain(secret);
  });

  it('keeps the last 200, survives a new worker, and clears', async () => {
    const log = new ActivityLog();
    for (let i = 0; i < ACTIVITY_LIMIT + 50; i++) log.record('tool.hover', { tab_id: i + 1 }, { result: {} }, i);
    await log.flush();
    const again = new ActivityLog();
    const entries = await again.list();
    expect(entries).toHaveLength(ACTIVITY_LIMIT);
    expect(entries[0]?.tab).toBe(ACTIVITY_LIMIT + 50);
    expect(entries.at(-1)?.tab).toBe(51);
    await again.clear();
    expect(await again.list()).toEqual([]);
    expect(await new ActivityLog().list()).toEqual([]);
  });
});
