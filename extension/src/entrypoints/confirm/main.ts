// The borrow confirmation: Allow or Deny; silence denies.

import { browser } from 'wxt/browser';
import type { BorrowRequest } from '../../lib/tools/borrow';

const request = new URLSearchParams(location.search).get('request') ?? '';
const $ = (id: string) => document.getElementById(id) as HTMLElement;

async function answer(allow: boolean): Promise<void> {
  await browser.runtime.sendMessage({ type: 'borrow-answer', request, allow });
  window.close();
}

$('allow').addEventListener('click', () => void answer(true));
$('deny').addEventListener('click', () => void answer(false));

void (async () => {
  const details = (await browser.runtime.sendMessage({ type: 'borrow-details', request })) as BorrowRequest | null;
  if (!details) {
    window.close();
    return;
  }
  $('title').textContent = details.title || '(untitled)';
  $('url').textContent = details.url;
  let left = Math.ceil(details.countdownMs / 1000);
  const tick = () => {
    $('countdown').textContent = `Denied automatically in ${left} s.`;
    if (left-- <= 0) void answer(false);
  };
  tick();
  setInterval(tick, 1000);
})();
