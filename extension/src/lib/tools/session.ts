// tool.session_start / tool.session_stop (docs/protocol.md, "Sessions").

import { browser } from 'wxt/browser';
import { invalid, ToolError } from '../errors';
import type { Params } from '../dispatcher';
import type { AgentSession, Sessions } from '../sessions';
import { optBool, optUint, sessionOf, str } from './params';
import { returnTab } from './tabs';
import type { ConsentGiven } from '@protocol/ConsentGiven';
import { SESSION_RULES } from '@protocol/constants';
import { type Consents, parseConsent } from '../consent';
import { parseRules } from '../siterules';
import { parseAgent } from '../agentinfo';

/** The page an Agent Window opens on: what it is and who opened it (docs/extension.md). */
export const AGENT_WINDOW_PAGE = '/agent-window.html';

const SIZE_MIN = 100;
const SIZE_MAX = 7680;

/**
 * Latchkey's additions (docs/protocol.md, "Latchkey's additions"): `site_rules` to
 * enforce in the window, and `consent` to ask the person before it opens.
 */
export async function sessionStart(p: Params, sessions: Sessions, consents?: Consents, signal?: AbortSignal): Promise<unknown> {
  const sessionId = str(p, 'session_id', 'tool.session_start');
  const width = optUint(p, 'width');
  const height = optUint(p, 'height');
  if ((width === undefined) !== (height === undefined)) throw invalid('width and height go together');
  for (const v of [width, height]) {
    if (v !== undefined && (v < SIZE_MIN || v > SIZE_MAX)) throw invalid(`window size must be ${SIZE_MIN}..=${SIZE_MAX}`);
  }
  const focused = optBool(p, 'focused', true);
  const agent = parseAgent(p.agent);
  if (sessions.get(sessionId)) throw new ToolError('protocol_error', `session ${sessionId} already exists`);
  const rules = p.site_rules === undefined ? undefined : parseRules(p.site_rules);
  if (p.site_rules !== undefined && !rules) throw invalid('site_rules is malformed');
  let consent: ConsentGiven | undefined;
  if (p.consent !== undefined) {
    // Fail closed: a start that asks is never let through unasked.
    if (!consents) throw new ToolError('protocol_error', 'this build cannot ask for consent');
    consent = await consents.ask(parseConsent(p.consent), signal ?? new AbortController().signal);
    if (sessions.get(sessionId)) throw new ToolError('protocol_error', `session ${sessionId} already exists`);
  }
  const created = await browser.windows.create({
    url: browser.runtime.getURL(`${AGENT_WINDOW_PAGE}?session=${encodeURIComponent(sessionId)}`),
    type: 'normal',
    focused,
    ...(width !== undefined && height !== undefined ? { width, height } : {}),
  });
  if (created?.id === undefined) throw new ToolError('protocol_error', 'the Agent Window could not be created');
  const first = created.tabs?.[0]?.id;
  sessions.add({
    id: sessionId,
    windowId: created.id,
    borrowed: new Map(),
    agentTabs: new Set(first !== undefined ? [first] : []),
    startedAt: Date.now(),
    ...(agent ? { agent } : {}),
    ...(rules ? { rules } : {}),
  });
  return { agent_window_id: created.id, ...(consent ? { consent } : {}) };
}

/** `latchkey.session_rules`: the session's policy changed while it ran. */
export async function sessionRules(p: Params, sessions: Sessions): Promise<unknown> {
  const session = sessionOf(p, sessions, SESSION_RULES);
  const rules = parseRules(p.site_rules);
  if (!rules) throw invalid('site_rules is malformed');
  session.rules = rules;
  return {};
}

export interface Teardown {
  returned: number[];
  failures: { tab_id: number; code: string; message: string }[];
}

/** (1) Give every borrowed tab back; the ones that would not go are listed. */
async function returnAll(session: AgentSession, sessions: Sessions): Promise<Teardown> {
  const out: Teardown = { returned: [], failures: [] };
  for (const tabId of [...session.borrowed.keys()]) {
    try {
      await returnTab(session, tabId, sessions);
      out.returned.push(tabId);
    } catch (e) {
      out.failures.push({ tab_id: tabId, code: 'cdp_failed', message: e instanceof Error ? e.message : String(e) });
    }
  }
  return out;
}

/** (2)–(4): forget the session, let the debugger go, close the Agent Window. */
async function closeSession(session: AgentSession, sessions: Sessions, detachDebugger: (s: AgentSession) => Promise<void>): Promise<void> {
  sessions.remove(session.id);
  await detachDebugger(session);
  try {
    await browser.windows.remove(session.windowId);
  } catch {
    // Already closed by the person: the session is gone either way.
  }
}

/**
 * Teardown order (docs/protocol.md, "Sessions"): (1) return borrowed tabs — stop there if any
 * fails, (2) forget the session's state and refs, (3) detach the debugger, (4) close
 * the Agent Window.
 */
export async function sessionStop(
  p: Params,
  sessions: Sessions,
  detachDebugger: (session: AgentSession) => Promise<void> = async () => undefined,
): Promise<unknown> {
  const session = sessionOf(p, sessions, 'tool.session_stop');
  const { returned, failures } = await returnAll(session, sessions);
  if (failures.length > 0) {
    return { ...(returned.length ? { returned_tab_ids: returned } : {}), return_failures: failures };
  }
  await closeSession(session, sessions, detachDebugger);
  return returned.length ? { returned_tab_ids: returned } : {};
}

/**
 * End a session on this side at once, whatever the gateway does: the person's Stop
 * or End, and every session when the connection drops. A borrowed tab that will not go back to where it
 * was gets a window of its own rather than closing with the Agent Window; only one
 * that cannot move at all is reported lost.
 */
export async function endHere(
  session: AgentSession,
  sessions: Sessions,
  detachDebugger: (session: AgentSession) => Promise<void> = async () => undefined,
): Promise<Teardown> {
  const out = await returnAll(session, sessions);
  const lost: Teardown['failures'] = [];
  for (const f of out.failures) {
    try {
      await browser.windows.create({ tabId: f.tab_id, focused: false });
      session.borrowed.delete(f.tab_id);
    } catch {
      lost.push(f);
    }
  }
  await closeSession(session, sessions, detachDebugger);
  return { returned: out.returned, failures: lost };
}
