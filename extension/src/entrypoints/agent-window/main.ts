// The page an Agent Window opens on (docs/extension.md, "Agent Windows"): what
// the window is, who opened it and why, and Stop. Text only: the agent's words
// are never markup.

import { browser } from 'wxt/browser';
import type { SessionSummary } from '../../lib/messages';

const session = new URLSearchParams(location.search).get('session') ?? '';
const $ = (id: string) => document.getElementById(id) as HTMLElement;

async function load(): Promise<void> {
  const s = (await browser.runtime.sendMessage({ type: 'session-details', session })) as SessionSummary | null;
  if (!s) {
    $('headline').textContent = 'This agent session has ended';
    $('stop').hidden = true;
    return;
  }
  $('headline').textContent = `${s.agent} works in this window`;
  $('agent').textContent = s.agent;
  $('purpose').textContent = s.purpose ?? 'Not given';
  $('server').textContent = s.server;
  const started = new Date(s.startedAt);
  $('started').textContent = started.toLocaleString();
  document.title = `${s.agent} · Agent Window · Latchkey`;
}

$('stop').addEventListener('click', async () => {
  await browser.runtime.sendMessage({ type: 'end-session', session });
  $('stop').hidden = true;
  $('ended').hidden = false;
  $('ended').textContent = 'Stopped. This window closes now.';
});

void load();
