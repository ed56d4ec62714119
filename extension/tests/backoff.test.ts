import { describe, expect, it } from 'vitest';
import { BACKOFF_CAP_MS, BACKOFF_FLOOR_MS, backoffDelay } from '../src/lib/backoff';
import { AFTER_CLOSE } from '@protocol/constants';
import { decideOnClose } from '../src/lib/close';

describe('backoffDelay', () => {
  it('stays within full-jitter bounds', () => {
    for (let attempt = 0; attempt < 40; attempt++) {
      const ceiling = Math.min(BACKOFF_CAP_MS, 1000 * 2 ** attempt);
      for (const draw of [0, 0.25, 0.5, 0.999999]) {
        const d = backoffDelay(attempt, () => draw);
        expect(d).toBeGreaterThanOrEqual(BACKOFF_FLOOR_MS);
        expect(d).toBeLessThanOrEqual(Math.max(BACKOFF_FLOOR_MS, ceiling));
      }
    }
  });

  it('grows from 1 s and caps at 30 s', () => {
    expect(backoffDelay(0, () => 0.999999)).toBe(999);
    expect(backoffDelay(3, () => 0.999999)).toBe(7999);
    expect(backoffDelay(10, () => 0.999999)).toBe(BACKOFF_CAP_MS - 1);
    expect(backoffDelay(1000, () => 0.5)).toBe(BACKOFF_CAP_MS / 2);
  });

  it('spreads reconnects (jitter)', () => {
    const seen = new Set(Array.from({ length: 50 }, () => backoffDelay(5)));
    expect(seen.size).toBeGreaterThan(10);
  });
});

describe('decideOnClose', () => {
  it.each([
    [4001, { kind: 'stop', state: 'revoked' }],
    [4002, { kind: 'stop', state: 'expired' }],
    [4003, { kind: 'replaced' }],
    [1001, { kind: 'reconnect' }],
    [1012, { kind: 'reconnect' }],
    [1006, { kind: 'reconnect' }],
    [4005, { kind: 'reconnect' }],
    [4004, { kind: 'reconnect' }],
    [1008, { kind: 'reconnect' }],
    [1013, { kind: 'reconnect' }],
  ])('close %i', (code, decision) => {
    expect(decideOnClose(code)).toEqual(decision);
  });

  it('follows the generated table for every close code the gateway sends', () => {
    for (const [code, after] of Object.entries(AFTER_CLOSE)) {
      const decision = decideOnClose(Number(code));
      const kind = { reconnect: 'reconnect', drop_token: 'reconnect', pair_again: 'stop', yield: 'replaced' }[after];
      expect(decision.kind, `close ${code}`).toBe(kind);
    }
  });
});
