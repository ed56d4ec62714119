// The borrow confirmation: who asks for which tab, Allow or Deny; silence denies
// when the countdown ends, and the agent is told it timed out.

import { browser } from 'wxt/browser';
import type { BorrowAnswer, BorrowRequest } from '../../lib/tools/borrow';

const request = new URLSearchParams(location.search).get('request') ?? '';
const $ = (id: string) => document.getElementById(id) as HTMLElement;

async function answer(a: BorrowAnswer): Promise<void> {
  await browser.runtime.sendMessage({ type: 'borrow-answer', request, answer: a });
  window.close();
}

$('allow').addEventListener('click', () => void answer('allow'));
$('deny').addEventListener('click', () => void answer('deny'));

void (async () => {
  const details = (await browser.runtime.sendMessage({ type: 'borrow-details', request })) as BorrowRequest | null;
  if (!details) {
    window.close();
    return;
  }
  $('agent').textContent = details.agent;
  $('title').textContent = details.title || '(untitled)';
  $('url').textContent = details.url;
  const deadline = Date.now() + details.countdownMs;
  const tick = () => {
    const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
    $('countdown').textContent = `No answer in ${left} s counts as no.`;
    if (left <= 0) void answer('timeout');
  };
  tick();
  setInterval(tick, 1000);
})();
