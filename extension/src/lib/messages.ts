// Messages between the popup and the service worker.

import type { ActivityEntry } from './activity';
import type { Status } from './gateway';
import type { Settings } from './settings';
import type { Allowance, ConsentView } from './consent';
import type { BorrowAnswer, BorrowRequest } from './tools/borrow';

export type Request =
  | { type: 'status' }
  | { type: 'pair'; link: string }
  | { type: 'disconnect' }
  | { type: 'connect' }
  | { type: 'forget' }
  | { type: 'borrow-details'; request: string }
  | { type: 'borrow-answer'; request: string; answer: BorrowAnswer }
  | { type: 'stop-all' }
  | { type: 'settings' }
  | { type: 'set-settings'; settings: Partial<Settings> }
  | { type: 'activity' }
  | { type: 'clear-activity' }
  | { type: 'help-list' }
  | { type: 'help-answer'; request: string; outcome: 'continued' | 'cancelled' }
  | { type: 'consent-list' }
  | { type: 'consent-answer'; request: string; allow: boolean; hours?: number }
  | { type: 'allowance-list' }
  | { type: 'allowance-withdraw'; agentId: string }
  | { type: 'session-list' }
  | { type: 'session-details'; session: string }
  | { type: 'end-session'; session: string };

/** What the extension's UI in an Agent Window page may send: Stop, Interrupt, and help answers. */
export type PageMessage =
  | { type: 'agent-stop' }
  | { type: 'agent-interrupt' }
  | { type: 'help-answer'; request: string; outcome: 'continued' | 'cancelled' };

export interface HelpView {
  request: string;
  title: string;
  prompt: string;
  tab: number;
}

/** One open session, as the popup and the Agent Window's page show it. */
export interface SessionSummary {
  id: string;
  /** "Booker (Travel team)", or "An agent from <server>". */
  agent: string;
  purpose?: string;
  server: string;
  startedAt: number;
  lastAction?: { method: string; at: number };
  /** A request_help waits for the person in this session. */
  helpWaiting: boolean;
}

export interface StatusView {
  status: Status;
  host?: string;
  deviceId?: string;
  /** The name the team knows this browser by (the server's, once connected). */
  label?: string;
  /** The team it serves, once a gateway has said. */
  team?: string;
  /** When the access ends (ms since the epoch). */
  expiresAt?: number;
  renewal?: string;
  /** When the connection was last up; now, while connected. */
  lastContactAt?: number;
  /** When the next attempt to connect is due, while offline. */
  nextRetryAt?: number;
  sessions: number;
  helpWaiting: number;
}

export type Reply =
  | StatusView
  | { ok: boolean; message: string }
  | BorrowRequest
  | Settings
  | ActivityEntry[]
  | HelpView[]
  | ConsentView[]
  | Allowance[]
  | SessionSummary[]
  | SessionSummary
  | null;

/** Human text for each status, also the accessible label. */
export const STATUS_TEXT: Record<Status, string> = {
  unpaired: 'Not paired',
  connecting: 'Connecting…',
  connected: 'Connected',
  offline: 'Offline, retrying',
  renewing: 'Renewing access',
  rejected: 'Access rejected, pair again',
  expired: 'Access expired, pair again',
  revoked: 'Access revoked by your admin, pair again',
  replaced: 'Connected from another window of this browser profile',
  disconnected: 'Paused',
};
