import { describe, expect, it } from 'vitest';
import { badgeFor } from '../src/lib/badge';

describe('the toolbar icon', () => {
  it('puts help first, then agents at work, then a connection that is down', () => {
    expect(badgeFor({ status: 'connected', sessions: 2, helpWaiting: 1 }).text).toBe('help');
    const working = badgeFor({ status: 'connected', sessions: 2, helpWaiting: 0 });
    expect([working.text, working.title]).toEqual(['2', 'Latchkey: 2 agents are working in this browser']);
    expect(badgeFor({ status: 'connected', sessions: 1, helpWaiting: 0 }).title).toBe('Latchkey: 1 agent is working in this browser');
    expect(badgeFor({ status: 'offline', sessions: 0, helpWaiting: 0 }).text).toBe('off');
    for (const status of ['revoked', 'rejected', 'expired'] as const) expect(badgeFor({ status, sessions: 0, helpWaiting: 0 }).text).toBe('!');
    expect(badgeFor({ status: 'connected', sessions: 0, helpWaiting: 0 }).text).toBe('');
    expect(badgeFor({ status: 'disconnected', sessions: 0, helpWaiting: 0 }).title).toMatch(/paused/);
  });
});
