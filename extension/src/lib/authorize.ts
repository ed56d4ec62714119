// POST …/authorize for pairing and renewal (docs/protocol.md, "Pairing and renewal"–2.3), and
// Latchkey's DELETE …/device when the person forgets the server: no cookies, no redirects, no
// cache, 10 s timeout. 401/403 are final ("rejected"); anything
// else that is not 200 means "unavailable, retry later".

import type { AuthorizeGrant } from '@protocol/AuthorizeGrant';
import type { AuthorizeRequest } from '@protocol/AuthorizeRequest';
import { type Credential, loadCredential, newToken, saveCredential } from './credential';
import type { PairingLink } from './link';

export type AuthorizeAnswer =
  | { kind: 'ok'; grant: AuthorizeGrant }
  | { kind: 'rejected'; status: number }
  | { kind: 'unavailable'; status?: number; retryAfterMs?: number };

const DEVICE_ID = /^[a-f0-9]{32}$/;
export const AUTHORIZE_TIMEOUT_MS = 10_000;
/** An unanswered renewal is resent at most this often. */
export const RENEW_RETRY_MS = 60_000;

export async function authorize(
  url: string,
  bearer: string,
  body: AuthorizeRequest,
  fetchImpl: typeof fetch = fetch,
): Promise<AuthorizeAnswer> {
  let response: Response;
  try {
    response = await fetchImpl(url, {
      method: 'POST',
      headers: { Authorization: `Bearer ${bearer}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      redirect: 'error',
      credentials: 'omit',
      cache: 'no-store',
      signal: AbortSignal.timeout(AUTHORIZE_TIMEOUT_MS),
    });
  } catch {
    return { kind: 'unavailable' };
  }
  if (response.status === 401 || response.status === 403) {
    return { kind: 'rejected', status: response.status };
  }
  if (response.status !== 200) {
    const retry = Number(response.headers.get('retry-after'));
    return {
      kind: 'unavailable',
      status: response.status,
      ...(Number.isFinite(retry) && retry > 0 ? { retryAfterMs: retry * 1000 } : {}),
    };
  }
  let grant: AuthorizeGrant;
  try {
    grant = (await response.json()) as AuthorizeGrant;
  } catch {
    return { kind: 'unavailable', status: 200 };
  }
  const expires = Date.parse(grant.expires_at);
  const renew = Date.parse(grant.renew_after);
  if (!DEVICE_ID.test(grant.device_id) || !Number.isFinite(expires) || !(renew < expires)) {
    return { kind: 'unavailable', status: 200 };
  }
  return { kind: 'ok', grant };
}

export type PairOutcome = { ok: true; credential: Credential } | { ok: false; message: string };

/** Redeem a pairing link. Nothing is stored unless the gateway says 200. */
export async function pair(link: PairingLink, label: string, fetchImpl: typeof fetch = fetch): Promise<PairOutcome> {
  const next = newToken();
  const answer = await authorize(link.authorizeUrl, link.secret, { action: 'pair', next_token: next, label }, fetchImpl);
  if (answer.kind === 'rejected') return { ok: false, message: 'This link expired or was already used. Ask for a new one.' };
  if (answer.kind === 'unavailable') return { ok: false, message: 'The server is busy or unreachable. Try again in a minute.' };
  const credential: Credential = {
    wsUrl: link.wsUrl,
    authorizeUrl: link.authorizeUrl,
    host: link.host,
    deviceId: answer.grant.device_id,
    token: next,
    expiresAt: Date.parse(answer.grant.expires_at),
    renewAfter: Date.parse(answer.grant.renew_after),
    label,
  };
  await saveCredential(credential);
  return { ok: true, credential };
}

export type RenewOutcome =
  | 'none'
  | 'not_due'
  | 'expired'
  | 'waiting'
  | 'renewed'
  | 'rejected'
  | 'unavailable'
  | 'device_changed';

/**
 * Renew when due (docs/protocol.md, "Pairing and renewal"): persist the successor before sending;
 * after a lost
 * answer resend exactly (bearer, next) at most once a minute, even past expiry; never
 * start a rotation on a grant known to be expired.
 */
export async function renewIfDue(now: number, fetchImpl: typeof fetch = fetch): Promise<RenewOutcome> {
  const c = await loadCredential();
  if (!c) return 'none';
  if (c.rejected) return 'rejected';
  if (c.stopped) return c.stopped === 'expired' ? 'expired' : 'rejected';
  let pending = c.pending;
  if (!pending) {
    if (now < c.renewAfter) return 'not_due';
    if (now >= c.expiresAt) return 'expired';
    pending = { bearer: c.token, next: newToken(), lastAttemptAt: now };
    await saveCredential({ ...c, pending });
  } else if (now - pending.lastAttemptAt < RENEW_RETRY_MS) {
    return 'waiting';
  } else {
    pending = { ...pending, lastAttemptAt: now };
    await saveCredential({ ...c, pending });
  }
  const answer = await authorize(c.authorizeUrl, pending.bearer, { action: 'renew', next_token: pending.next }, fetchImpl);
  const latest = (await loadCredential()) ?? c;
  switch (answer.kind) {
    case 'ok': {
      if (answer.grant.device_id !== c.deviceId) return 'device_changed';
      const { pending: _done, ...rest } = latest;
      await saveCredential({
        ...rest,
        token: pending.next,
        expiresAt: Date.parse(answer.grant.expires_at),
        renewAfter: Date.parse(answer.grant.renew_after),
      });
      return 'renewed';
    }
    case 'rejected':
      // The candidate is kept (docs/protocol.md, "Pairing and renewal"); the credential is no
      // longer usable.
      await saveCredential({ ...latest, rejected: true });
      return 'rejected';
    case 'unavailable':
      return 'unavailable';
  }
}

/**
 * "Forget this server": end this device on the gateway too (Latchkey's
 * `DELETE /extension/device`, sent only to a gateway that listed `unpair`).
 * True when the gateway no longer holds it: removed now (204), or the credential
 * was already dead there (401).
 */
export async function unpair(c: Credential, fetchImpl: typeof fetch = fetch): Promise<boolean> {
  const url = c.authorizeUrl.replace(/\/authorize$/, '/device');
  try {
    const r = await fetchImpl(url, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${c.token}` },
      credentials: 'omit',
      redirect: 'error',
      cache: 'no-store',
      signal: AbortSignal.timeout(AUTHORIZE_TIMEOUT_MS),
    });
    return r.status === 204 || r.status === 401;
  } catch {
    return false;
  }
}
