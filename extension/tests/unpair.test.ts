import { describe, expect, it } from 'vitest';
import { unpair } from '../src/lib/authorize';
import type { Credential } from '../src/lib/credential';

const credential: Credential = {
  wsUrl: 'wss://gw.test/extension',
  authorizeUrl: 'https://gw.test/extension/authorize',
  host: 'gw.test',
  deviceId: '0123456789abcdef0123456789abcdef',
  token: 'T'.repeat(43),
  expiresAt: 0,
  renewAfter: 0,
  label: 'x',
};

describe('forgetting the server', () => {
  it('deletes this device with its own credential, and no cookie, redirect or cache', async () => {
    const seen: [string, RequestInit][] = [];
    const fetchImpl = (async (url: string, init: RequestInit) => {
      seen.push([url, init]);
      return new Response(null, { status: 204 });
    }) as unknown as typeof fetch;
    expect(await unpair(credential, fetchImpl)).toBe(true);
    const [url, init] = seen[0] ?? ['', {}];
    expect(url).toBe('https://gw.test/extension/device');
    expect(init.method).toBe('DELETE');
    expect((init.headers as Record<string, string>).authorization).toBe(`Bearer ${'T'.repeat(43)}`);
    expect([init.credentials, init.redirect, init.cache]).toEqual(['omit', 'error', 'no-store']);
  });

  it('counts a credential already dead there as done, and a failure as not told', async () => {
    const answering = (status: number) => (async () => new Response(null, { status })) as unknown as typeof fetch;
    expect(await unpair(credential, answering(401))).toBe(true);
    expect(await unpair(credential, answering(503))).toBe(false);
    const failing = (async () => {
      throw new TypeError('network error');
    }) as unknown as typeof fetch;
    expect(await unpair(credential, failing)).toBe(false);
  });
});
