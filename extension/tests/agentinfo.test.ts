import { describe, expect, it } from 'vitest';
import { agentLabel, parseAgent } from '../src/lib/agentinfo';
import { ago, duration, fromNow } from '../src/lib/when';

describe('who drives a session', () => {
  it('keeps the gateway\'s agent as bounded text and refuses what is not one', () => {
    const a = parseAgent({ agent_id: 'tok', name: ' Booker ', team: 'Travel', purpose: 'x'.repeat(500) });
    expect(a).toEqual({ agent_id: 'tok', name: 'Booker', team: 'Travel', purpose: 'x'.repeat(200) });
    expect(parseAgent({ agent_id: 'tok', name: 'n'.repeat(300), team: 't' })?.name).toHaveLength(100);
    for (const bad of [undefined, null, 'Booker', [], {}, { name: '' }, { name: 7 }]) expect(parseAgent(bad)).toBeUndefined();
    expect(parseAgent({ name: 'Booker', purpose: '   ' })).toEqual({ agent_id: '', name: 'Booker', team: '' });
  });

  it('names the agent, or the server when the gateway does not say', () => {
    expect(agentLabel({ agent_id: 'a', name: 'Booker', team: 'Travel' }, 'gw.test')).toBe('Booker (Travel)');
    expect(agentLabel({ agent_id: 'a', name: 'Booker', team: '' }, 'gw.test')).toBe('Booker');
    expect(agentLabel(undefined, 'gw.test')).toBe('An agent from gw.test');
  });

  it('says how long in words a person reads at a glance', () => {
    const t0 = 1_000_000;
    expect(duration(t0, t0 + 59_000)).toBe('less than a minute');
    expect(duration(t0, t0 + 3 * 60_000 + 5_000)).toBe('3 min');
    expect(duration(t0, t0 + 65 * 60_000)).toBe('1 h 5 min');
    expect(duration(t0, t0 + 120 * 60_000)).toBe('2 h');
    expect(duration(t0 + 5_000, t0)).toBe('less than a minute');
    expect(duration(t0, t0 + 3 * 86_400_000)).toBe('3 days');
    expect(ago(t0, t0 + 30_000)).toBe('just now');
    expect(ago(t0, t0 + 5 * 60_000)).toBe('5 min ago');
    expect(fromNow(t0 + 89 * 86_400_000 + 5_000, t0)).toBe('in 89 days');
    expect(fromNow(t0 + 4_200, t0)).toBe('in 5 s');
    expect(fromNow(t0 - 1, t0)).toBe('now');
  });
});
