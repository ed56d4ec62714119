// The person's say before a session starts (docs/policy.md, "Consent"): when the
// gateway's start carries `consent`, the person is asked in a notification and in
// the popup (agent, team, purpose, capabilities) and answers Allow once, Allow for
// some hours, or Deny. No answer in time, a closed prompt or a cancel from the
// gateway all deny. An allowance for some hours is remembered per server and
// agent, listed in the popup and withdrawn there.

import { browser } from 'wxt/browser';
import type { ConsentGiven } from '@protocol/ConsentGiven';
import type { ConsentRequest } from '@protocol/ConsentRequest';
import { MAX_ALLOWANCE_HOURS } from '@protocol/constants';
import { invalid, ToolError } from './errors';

const KEY = 'latchkey.allowances';
/** The longest the extension waits for the person, whatever the gateway asks. */
export const MAX_CONSENT_WAIT_MS = 300_000;

/** A consent prompt as the popup shows it. */
export interface ConsentView {
  request: string;
  agent: string;
  team: string;
  purpose?: string;
  capabilities: string[];
  /** When silence becomes a no (ms since the epoch). */
  deadline: number;
}

/** Sessions of `agentId` on `server` start without asking until `until`. */
export interface Allowance {
  server: string;
  agentId: string;
  agent: string;
  team: string;
  until: number;
}

export type Decision = { allow: false } | { allow: true; hours?: number };

interface Pending {
  view: ConsentView;
  decide: (d: Decision) => void;
}

const text = (v: unknown, max: number): string => (typeof v === 'string' ? v.slice(0, max) : '');

/** `consent` as the gateway sent it; a malformed one is refused (never treated as absent). */
export function parseConsent(raw: unknown): ConsentRequest {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw invalid('consent must be an object');
  const c = raw as Record<string, unknown>;
  const timeout = typeof c.timeout_ms === 'number' && Number.isInteger(c.timeout_ms) && c.timeout_ms > 0 ? c.timeout_ms : 60_000;
  if (typeof c.agent_id !== 'string' || c.agent_id === '') throw invalid('consent.agent_id must be a string');
  return {
    agent_id: text(c.agent_id, 64),
    agent: text(c.agent, 100) || 'an agent',
    team: text(c.team, 100) || 'your team',
    ...(typeof c.purpose === 'string' && c.purpose !== '' ? { purpose: text(c.purpose, 200) } : {}),
    capabilities: Array.isArray(c.capabilities) ? (c.capabilities.filter((x) => typeof x === 'string').slice(0, 16) as ConsentRequest['capabilities']) : [],
    timeout_ms: Math.min(timeout, MAX_CONSENT_WAIT_MS),
  };
}

export class Consents {
  private readonly pending = new Map<string, Pending>();

  /** `server`: the gateway this browser is paired with (allowances are per server). */
  constructor(private readonly server: () => Promise<string>) {
    browser.notifications?.onButtonClicked.addListener((id, button) => {
      this.answer(id, button === 0 ? { allow: true } : { allow: false });
    });
    browser.notifications?.onClosed.addListener((id, byUser) => {
      if (byUser) this.answer(id, { allow: false });
    });
  }

  list(): ConsentView[] {
    return [...this.pending.values()].map((p) => p.view);
  }

  /** The person's answer, from the notification or the popup. */
  answer(request: string, decision: Decision): boolean {
    const p = this.pending.get(request);
    if (!p) return false;
    p.decide(decision);
    return true;
  }

  /** The allowances still running, for this server. */
  async allowances(): Promise<Allowance[]> {
    const server = await this.server();
    return (await this.stored()).filter((a) => a.server === server && a.until > Date.now());
  }

  /** Withdraw an allowance: the agent's next session asks again. */
  async withdraw(agentId: string): Promise<void> {
    const server = await this.server();
    await this.store((await this.stored()).filter((a) => !(a.server === server && a.agentId === agentId)));
  }

  /**
   * Ask the person about a session of `req.agent`, unless an allowance covers it.
   * Resolves with how it was let in; a no is `permission_denied` with reason
   * `consent_denied`, a cancel from the gateway `cancelled`.
   */
  async ask(req: ConsentRequest, signal: AbortSignal): Promise<ConsentGiven> {
    if ((await this.allowances()).some((a) => a.agentId === req.agent_id)) return 'remembered';
    const request = crypto.randomUUID();
    const view: ConsentView = {
      request,
      agent: req.agent,
      team: req.team,
      ...(req.purpose ? { purpose: req.purpose } : {}),
      capabilities: req.capabilities,
      deadline: Date.now() + Number(req.timeout_ms),
    };
    let decide: (d: Decision | 'cancelled') => void = () => undefined;
    const decided = new Promise<Decision | 'cancelled'>((resolve) => {
      decide = resolve;
    });
    const timer = setTimeout(() => decide({ allow: false }), Number(req.timeout_ms));
    const onAbort = () => decide('cancelled');
    signal.addEventListener('abort', onAbort);
    this.pending.set(request, { view, decide });
    try {
      await browser.notifications
        ?.create(request, {
          type: 'basic',
          iconUrl: browser.runtime.getURL('/icon-128.png'),
          title: `${req.agent} (${req.team}) asks to use this browser`,
          message: `${req.purpose ? `${req.purpose}\n` : ''}It may: ${req.capabilities.join(', ')}. Open Latchkey to allow it for some hours.`.slice(0, 500),
          buttons: [{ title: 'Allow once' }, { title: 'Deny' }],
          requireInteraction: true,
          priority: 2,
        })
        .catch(() => undefined);
      const decision = await decided;
      if (decision === 'cancelled') throw new ToolError('cancelled', 'the session start was cancelled while its person was asked');
      if (!decision.allow) {
        throw ToolError.reason('permission_denied', "the browser's person did not let this session start", 'consent_denied');
      }
      const hours = Math.min(Math.max(Math.floor(decision.hours ?? 0), 0), MAX_ALLOWANCE_HOURS);
      if (hours === 0) return 'once';
      await this.remember({ server: await this.server(), agentId: req.agent_id, agent: req.agent, team: req.team, until: Date.now() + hours * 3_600_000 });
      return 'for_hours';
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      this.pending.delete(request);
      await browser.notifications?.clear(request).catch(() => undefined);
    }
  }

  private async remember(a: Allowance): Promise<void> {
    const others = (await this.stored()).filter((x) => !(x.server === a.server && x.agentId === a.agentId) && x.until > Date.now());
    await this.store([...others, a]);
  }

  private async stored(): Promise<Allowance[]> {
    const v = (await browser.storage.local.get(KEY))[KEY];
    return Array.isArray(v) ? (v as Allowance[]) : [];
  }

  private async store(list: Allowance[]): Promise<void> {
    await browser.storage.local.set({ [KEY]: list });
  }
}
