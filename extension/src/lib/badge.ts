// The toolbar icon tells the person what is going on without opening the popup
// (docs/extension.md, "The toolbar icon"): help waiting comes first, then agents
// at work, then a connection that is down or refused.

import { browser } from 'wxt/browser';
import type { Status } from './gateway';

export interface BadgeState {
  status: Status;
  sessions: number;
  helpWaiting: number;
}

export interface Badge {
  text: string;
  color: string;
  title: string;
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** What the icon shows for `s`. */
export function badgeFor(s: BadgeState): Badge {
  if (s.helpWaiting > 0) {
    return { text: 'help', color: '#b06000', title: `Latchkey: ${plural(s.helpWaiting, 'agent waits', 'agents wait')} for your help` };
  }
  if (s.sessions > 0) {
    return { text: String(s.sessions), color: '#b3261e', title: `Latchkey: ${plural(s.sessions, 'agent is', 'agents are')} working in this browser` };
  }
  switch (s.status) {
    case 'revoked':
    case 'rejected':
    case 'expired':
      return { text: '!', color: '#b3261e', title: 'Latchkey: access ended; pair again' };
    case 'offline':
      return { text: 'off', color: '#5f6368', title: 'Latchkey: offline, retrying' };
    case 'disconnected':
      return { text: '', color: '#5f6368', title: 'Latchkey: paused; agents cannot reach this browser' };
    case 'unpaired':
      return { text: '', color: '#5f6368', title: 'Latchkey: not paired' };
    default:
      return { text: '', color: '#1a7f37', title: 'Latchkey: connected; no agent is working' };
  }
}

let last = '';

/** Show `s` on the toolbar icon (only when it changed). */
export async function showBadge(s: BadgeState): Promise<void> {
  const b = badgeFor(s);
  const key = JSON.stringify(b);
  if (key === last) return;
  last = key;
  await browser.action.setBadgeBackgroundColor({ color: b.color }).catch(() => undefined);
  await browser.action.setBadgeText({ text: b.text }).catch(() => undefined);
  await browser.action.setTitle({ title: b.title }).catch(() => undefined);
}
