import { beforeEach, describe, expect, it, vi } from 'vitest';
import { fakeBrowser } from 'wxt/testing';
import { Consents, parseConsent } from '../src/lib/consent';
import { ToolError } from '../src/lib/errors';

const request = (over: Record<string, unknown> = {}) =>
  parseConsent({ agent_id: 'tok1', agent: 'shopper', team: 'acme', purpose: 'compare prices', capabilities: ['session', 'read'], timeout_ms: 60_000, ...over });

/** Answer the next prompt as soon as it shows. */
async function answerWhenAsked(consents: Consents, decide: (request: string) => void): Promise<void> {
  await vi.waitFor(() => expect(consents.list()).toHaveLength(1));
  decide(consents.list()[0]?.request ?? '');
}

describe('consent', () => {
  let consents: Consents;
  beforeEach(() => {
    fakeBrowser.reset();
    consents = new Consents(async () => 'gw.example.com');
  });

  it('shows who asks and why, and answers as the person did', async () => {
    const once = consents.ask(request(), new AbortController().signal);
    await answerWhenAsked(consents, (r) => {
      const [view] = consents.list();
      expect(view).toMatchObject({ agent: 'shopper', team: 'acme', purpose: 'compare prices', capabilities: ['session', 'read'] });
      consents.answer(r, { allow: true });
    });
    expect(await once).toBe('once');
    expect(await consents.allowances()).toEqual([]);

    const denied = consents.ask(request(), new AbortController().signal);
    await answerWhenAsked(consents, (r) => consents.answer(r, { allow: false }));
    await expect(denied).rejects.toMatchObject({ code: 'permission_denied', data: { reason: 'consent_denied' } });
    expect(consents.list()).toEqual([]);
  });

  it('remembers an allowance for some hours, per agent, until withdrawn', async () => {
    const hours = consents.ask(request(), new AbortController().signal);
    await answerWhenAsked(consents, (r) => consents.answer(r, { allow: true, hours: 100 }));
    expect(await hours).toBe('for_hours');
    const [allowance] = await consents.allowances();
    expect(allowance?.agentId).toBe('tok1');
    // Capped at a day, whatever the popup sent.
    expect(allowance?.until).toBeLessThanOrEqual(Date.now() + 24 * 3_600_000);
    expect(await consents.ask(request(), new AbortController().signal)).toBe('remembered');
    // Another agent is still asked.
    const other = consents.ask(request({ agent_id: 'tok2' }), new AbortController().signal);
    await answerWhenAsked(consents, (r) => consents.answer(r, { allow: false }));
    await expect(other).rejects.toBeInstanceOf(ToolError);
    await consents.withdraw('tok1');
    expect(await consents.allowances()).toEqual([]);
  });

  it('denies when nobody answers in time, and gives up on a cancel', async () => {
    vi.useFakeTimers();
    try {
      const silent = consents.ask(request({ timeout_ms: 1_000 }), new AbortController().signal);
      const outcome = expect(silent).rejects.toMatchObject({ data: { reason: 'consent_denied' } });
      await vi.advanceTimersByTimeAsync(1_001);
      await outcome;
    } finally {
      vi.useRealTimers();
    }
    const abort = new AbortController();
    const cancelled = consents.ask(request(), abort.signal);
    await vi.waitFor(() => expect(consents.list()).toHaveLength(1));
    abort.abort();
    await expect(cancelled).rejects.toMatchObject({ code: 'cancelled' });
  });

  it('refuses a malformed request rather than reading it as none', () => {
    expect(() => parseConsent('yes')).toThrow(ToolError);
    expect(() => parseConsent({ agent: 'x' })).toThrow(/agent_id/);
    expect(parseConsent({ agent_id: 'a', timeout_ms: 10_000_000 }).timeout_ms).toBe(300_000);
  });
});
