// The device credential, kept only in extension storage (`storage.local`, which
// content scripts cannot read: access level TRUSTED_CONTEXTS). The token is sent
// only to the paired endpoint, as `bsk-auth.<token>` and as the renewal bearer.

import { browser } from 'wxt/browser';

export interface Credential {
  wsUrl: string;
  authorizeUrl: string;
  host: string;
  deviceId: string;
  token: string;
  /** Epoch ms. */
  expiresAt: number;
  renewAfter: number;
  label: string;
  /** A renewal sent but not yet answered: retried exactly (docs/protocol.md, "Pairing and
  /** renewal"). */
  pending?: { bearer: string; next: string; lastAttemptAt: number };
  /** The gateway refused this credential for good. */
  rejected?: boolean;
  /** The gateway closed with revoked or expired: do not connect or renew again. */
  stopped?: 'revoked' | 'expired';
}

const KEY = 'latchkey.credential';

export async function loadCredential(): Promise<Credential | undefined> {
  const got = await browser.storage.local.get(KEY);
  return got[KEY] as Credential | undefined;
}

export async function saveCredential(c: Credential): Promise<void> {
  await browser.storage.local.set({ [KEY]: c });
}

export async function forgetCredential(): Promise<void> {
  await browser.storage.local.remove(KEY);
}

/** A fresh 256-bit token, unpadded base64url (43 characters). */
export function newToken(): string {
  const bytes = new Uint8Array(32);
  crypto.getRandomValues(bytes);
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
