// The web console's one script (docs/console.md), loaded from this origin only
// (the CSP has no inline script): copy buttons and expiry countdowns. Every page
// works without it.
'use strict';

for (const button of document.querySelectorAll('button[data-copy]')) {
  button.addEventListener('click', async () => {
    const field = document.getElementById(button.dataset.copy);
    if (!field) return;
    try {
      await navigator.clipboard.writeText(field.value);
      button.textContent = 'Copied';
    } catch {
      field.select();
      button.textContent = 'Press Ctrl+C';
    }
  });
}

/** "4 min 10 s" left until `ms`, or null once it has passed. */
function left(ms) {
  const s = Math.round((ms - Date.now()) / 1000);
  if (s <= 0) return null;
  const m = Math.floor(s / 60);
  return m > 0 ? `${m} min ${s % 60} s` : `${s} s`;
}

function tick() {
  for (const el of document.querySelectorAll('[data-expires]')) {
    const time = el.querySelector('time');
    if (!time) continue;
    const rest = left(Number(el.dataset.expires));
    time.textContent = rest ? `in ${rest}` : 'now: expired';
    el.classList.toggle('expired', rest === null);
  }
}
if (document.querySelector('[data-expires]')) {
  tick();
  setInterval(tick, 1000);
}

// Live updates: the server sends the list again, rendered and escaped by it,
// whenever it changed (docs/console.md, "Live updates").
const live = document.querySelector('[data-live]');
if (live && 'EventSource' in window) {
  const source = new EventSource(live.dataset.live);
  source.addEventListener('list', (event) => {
    const { html } = JSON.parse(event.data);
    if (typeof html === 'string') live.innerHTML = html;
  });
  // The sign-in ended or the server went away: the page stays as it was.
  source.addEventListener('error', () => {
    if (source.readyState === EventSource.CLOSED) live.dataset.state = 'stale';
  });
}
