// Who drives a session, as the person sees it (docs/extension.md, "What the
// person sees"): the gateway's `agent` param of tool.session_start (Latchkey's
// `agent_info` addition), bounded and kept as text. A contract-only gateway
// sends none; the session is then "an agent from <server>".

import type { SessionAgent } from '@protocol/SessionAgent';

const text = (v: unknown, max: number): string => (typeof v === 'string' ? v.slice(0, max).trim() : '');

/** `agent` as the gateway sent it, or undefined when absent or malformed (only shown, never trusted). */
export function parseAgent(raw: unknown): SessionAgent | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const a = raw as Record<string, unknown>;
  const name = text(a.name, 100);
  if (!name) return undefined;
  const purpose = text(a.purpose, 200);
  return {
    agent_id: text(a.agent_id, 64),
    name,
    team: text(a.team, 100),
    ...(purpose ? { purpose } : {}),
  };
}

/** "Booker (Travel team)", or "An agent from gw.example" without agent info. */
export function agentLabel(agent: SessionAgent | undefined, server: string): string {
  if (!agent) return `An agent from ${server}`;
  return agent.team ? `${agent.name} (${agent.team})` : agent.name;
}
