import { describe, expect, it } from 'vitest';
import { ToolError } from '../src/lib/errors';
import { type AgentSession, Sessions } from '../src/lib/sessions';
import { sessionOf } from '../src/lib/tools/params';
import { sessionStop } from '../src/lib/tools/session';

const agentSession = (id: string): AgentSession => ({
  id,
  windowId: 1,
  startedAt: 0,
  agentTabs: new Set([2]),
  borrowed: new Map(),
});

describe('a session the person ended', () => {
  it('takes no call from the moment it is ending, though it is still torn down', async () => {
    const sessions = new Sessions();
    const s = agentSession('s1');
    sessions.add(s);
    expect(sessionOf({ session_id: 's1' }, sessions, 'tool.snapshot')).toBe(s);

    s.ending = true;
    expect(() => sessionOf({ session_id: 's1' }, sessions, 'tool.snapshot')).toThrow(/ended by the person/);
    const refusal = (() => {
      try {
        sessionOf({ session_id: 's1' }, sessions, 'tool.click');
      } catch (e) {
        return e;
      }
    })();
    expect(refusal).toBeInstanceOf(ToolError);
    expect((refusal as ToolError).code).toBe('not_found');
    await expect(sessionStop({ session_id: 's1' }, sessions)).rejects.toThrow(/ended by the person/);
    // Still there for the teardown that is under way (its window, its tabs).
    expect(sessions.byWindow(1)).toBe(s);
  });

  it('an unknown session is not_found as before', () => {
    expect(() => sessionOf({ session_id: 'nope' }, new Sessions(), 'tool.snapshot')).toThrow(/not found/);
  });
});
