import { beforeEach, describe, expect, it } from 'vitest';
import { fakeBrowser } from 'wxt/testing';
import { pair, RENEW_RETRY_MS, renewIfDue } from '../src/lib/authorize';
import { type Credential, loadCredential, saveCredential } from '../src/lib/credential';
import { parseLink } from '../src/lib/link';

const DEVICE = '0123456789abcdef0123456789abcdef';
const DAY = 86_400_000;

interface Call {
  bearer: string;
  body: { action: string; next_token: string };
  init: RequestInit;
}

/** A fake gateway: records requests; answers from a queue (or a lost answer). */
function gateway(answers: ('ok' | 'lost' | 401 | 503)[], now = Date.now()) {
  const calls: Call[] = [];
  const fetchImpl = (async (_url: string, init: RequestInit) => {
    const headers = init.headers as Record<string, string>;
    calls.push({ bearer: (headers.Authorization ?? '').replace('Bearer ', ''), body: JSON.parse(String(init.body)), init });
    const a = answers.shift() ?? 'ok';
    if (a === 'lost') throw new TypeError('network error');
    if (a !== 'ok') return new Response('{"error":"x"}', { status: a });
    const grant = {
      device_id: DEVICE,
      expires_at: new Date(now + 90 * DAY).toISOString(),
      renew_after: new Date(now + 30 * DAY).toISOString(),
    };
    return new Response(JSON.stringify(grant), { status: 200 });
  }) as unknown as typeof fetch;
  return { calls, fetchImpl };
}

async function paired(renewAfter: number, expiresAt: number): Promise<Credential> {
  const c: Credential = {
    wsUrl: 'wss://gw.example.com/extension',
    authorizeUrl: 'https://gw.example.com/extension/authorize',
    host: 'gw.example.com',
    deviceId: DEVICE,
    token: 'T'.repeat(43),
    expiresAt,
    renewAfter,
    label: 'test',
  };
  await saveCredential(c);
  return c;
}

describe('pairing', () => {
  beforeEach(() => fakeBrowser.reset());

  it('stores the credential only after a 200, with the hygiene the protocol asks of /authorize', async () => {
    const link = parseLink(`wss://gw.example.com/extension#${'s'.repeat(43)}`);
    if (!link.ok) throw new Error('link');
    const g = gateway([401, 'ok']);
    const refused = await pair(link.link, 'label', g.fetchImpl);
    expect(refused).toEqual({ ok: false, message: 'This link expired or was already used. Ask for a new one.' });
    expect(await loadCredential()).toBeUndefined();
    const ok = await pair(link.link, 'label', g.fetchImpl);
    expect(ok.ok).toBe(true);
    const stored = await loadCredential();
    expect(stored?.deviceId).toBe(DEVICE);
    expect(stored?.token).toBe(g.calls[1]?.body.next_token);
    expect(g.calls[1]?.bearer).toBe('s'.repeat(43));
    expect(g.calls[1]?.init.redirect).toBe('error');
    expect(g.calls[1]?.init.credentials).toBe('omit');
    expect(g.calls[1]?.body.next_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});

describe('renewIfDue', () => {
  beforeEach(() => fakeBrowser.reset());

  it('does nothing before renew_after and never starts on an expired grant', async () => {
    const now = Date.now();
    await paired(now + DAY, now + 2 * DAY);
    expect(await renewIfDue(now, gateway([]).fetchImpl)).toBe('not_due');
    await paired(now - 2 * DAY, now - DAY);
    const g = gateway([]);
    expect(await renewIfDue(now, g.fetchImpl)).toBe('expired');
    expect(g.calls).toHaveLength(0);
  });

  it('persists the successor before sending and retries exactly after a lost answer, at most once a minute', async () => {
    const now = Date.now();
    const old = await paired(now - DAY, now + DAY);
    const g = gateway(['lost', 'ok']);
    expect(await renewIfDue(now, g.fetchImpl)).toBe('unavailable');
    const pending = (await loadCredential())?.pending;
    expect(pending?.bearer).toBe(old.token);
    expect(pending?.next).toBe(g.calls[0]?.body.next_token);
    // Too soon: no request.
    expect(await renewIfDue(now + RENEW_RETRY_MS - 1, g.fetchImpl)).toBe('waiting');
    expect(g.calls).toHaveLength(1);
    // A "service worker restart": nothing in memory, everything from storage.
    expect(await renewIfDue(now + RENEW_RETRY_MS, g.fetchImpl)).toBe('renewed');
    expect(g.calls[1]?.bearer).toBe(old.token);
    expect(g.calls[1]?.body.next_token).toBe(pending?.next);
    const after = await loadCredential();
    expect(after?.token).toBe(pending?.next);
    expect(after?.pending).toBeUndefined();
    expect(after?.renewAfter).toBeGreaterThan(now + 29 * DAY);
  });

  it('retries a pending renewal even past expiry', async () => {
    const now = Date.now();
    await paired(now - 2 * DAY, now + 1000);
    const g = gateway(['lost', 'ok']);
    expect(await renewIfDue(now, g.fetchImpl)).toBe('unavailable');
    expect(await renewIfDue(now + 2 * RENEW_RETRY_MS, g.fetchImpl)).toBe('renewed');
  });

  it('tells rejected from unavailable', async () => {
    const now = Date.now();
    await paired(now - DAY, now + DAY);
    expect(await renewIfDue(now, gateway([503]).fetchImpl)).toBe('unavailable');
    expect((await loadCredential())?.rejected).toBeUndefined();
    expect(await renewIfDue(now + RENEW_RETRY_MS, gateway([401]).fetchImpl)).toBe('rejected');
    expect((await loadCredential())?.rejected).toBe(true);
    expect((await loadCredential())?.pending).toBeDefined();
  });
});
