// The popup: pair with a link, see the connection, disconnect or forget.

import { browser } from 'wxt/browser';
import type { ActivityEntry } from '../../lib/activity';
import type { Allowance, ConsentView } from '../../lib/consent';
import { type HelpView, type Reply, type Request, type SessionSummary, STATUS_TEXT, type StatusView } from '../../lib/messages';
import { ago, duration, exact, fromNow } from '../../lib/when';
import type { Settings } from '../../lib/settings';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

async function ask(req: Request): Promise<Reply> {
  return (await browser.runtime.sendMessage(req)) as Reply;
}

/** One line under the status: what the state means and what to do about it. */
function hintFor(v: StatusView, now: number): string {
  switch (v.status) {
    case 'unpaired':
      return 'Paste the pairing link your team admin sent you. Agents can use this browser only after that, and only in windows marked in red.';
    case 'connecting':
      return `Connecting to ${v.host ?? 'your team'}…`;
    case 'connected':
      return v.sessions > 0 ? '' : 'Ready. No agent is working in this browser now.';
    case 'renewing':
      return 'Renewing this browser’s access.';
    case 'offline': {
      const last = v.lastContactAt ? `Last connected ${ago(v.lastContactAt, now)}. ` : '';
      const next = v.nextRetryAt ? `Trying again ${fromNow(v.nextRetryAt, now)}.` : 'Trying again shortly.';
      return `Cannot reach ${v.host ?? 'the server'}. ${last}${next}`;
    }
    case 'disconnected':
      return 'Paused: no agent can reach this browser until you connect again.';
    case 'revoked':
      return 'Your team admin revoked this browser’s access. Pair again with a new link to lend it again.';
    case 'rejected':
      return 'The server no longer accepts this browser’s credential. Pair again with a new link.';
    case 'expired':
      return 'This browser’s access expired. Pair again with a new link.';
    case 'replaced':
      return 'Another window of this browser profile holds the connection.';
  }
}

/** Set a row of the details, or hide it when there is nothing to say. */
function row(id: string, text: string | undefined, title?: string): void {
  const dd = $(id);
  const dt = $(`${id}-term`);
  dd.textContent = text ?? '';
  if (title) dd.title = title;
  else dd.removeAttribute('title');
  dd.hidden = dt.hidden = !text;
}

const ENDED = ['revoked', 'rejected', 'expired'];

function show(view: StatusView): void {
  const now = Date.now();
  const status = $('status');
  const text = STATUS_TEXT[view.status];
  $('status-text').textContent = text;
  status.setAttribute('aria-label', text);
  status.dataset.state = view.status;
  $('status-hint').textContent = hintFor(view, now);
  const paired = view.deviceId !== undefined;
  const ended = ENDED.includes(view.status);
  // Each state shows its own fields only.
  $('details').hidden = !paired;
  row('team', paired ? view.team : undefined);
  $('host').textContent = view.host ?? '';
  $('label').textContent = view.label ?? '';
  $('device').textContent = view.deviceId ?? '';
  row(
    'expires',
    !ended && view.expiresAt ? `until ${new Date(view.expiresAt).toLocaleDateString()} (${fromNow(view.expiresAt, now)})` : undefined,
    view.expiresAt ? exact(view.expiresAt) : undefined,
  );
  row(
    'contact',
    view.status === 'connected' ? 'now' : !ended && view.lastContactAt ? ago(view.lastContactAt, now) : undefined,
    view.lastContactAt ? exact(view.lastContactAt) : undefined,
  );
  const renewalWorth = view.renewal && !['not due', 'renewed'].includes(view.renewal) && !ended;
  row('renewal', renewalWorth ? view.renewal : undefined);
  $('pair-form').hidden = paired && !ended;
  $('actions').hidden = !paired;
  $('stop-all').hidden = view.sessions === 0;
  $('disconnect').hidden = !['connected', 'connecting', 'offline', 'renewing'].includes(view.status);
  $('connect').hidden = view.status !== 'disconnected';
  $('settings').hidden = !paired || ended;
  if (!paired) $('forget-confirm').hidden = true;
}

function showActivity(entries: ActivityEntry[]): void {
  const list = $('activity');
  list.replaceChildren(
    ...entries.map((e) => {
      const li = document.createElement('li');
      li.dataset.outcome = e.outcome;
      const time = document.createElement('time');
      time.dateTime = new Date(e.at).toISOString();
      time.textContent = new Date(e.at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
      time.title = exact(e.at);
      const what = document.createElement('span');
      what.textContent = `${e.method.replace(/^tool\./, '').replace(/_/g, ' ')}${e.reason ? ` · ${e.reason.replace(/_/g, ' ')}` : ''}`;
      const outcome = document.createElement('span');
      outcome.className = 'outcome';
      outcome.textContent = e.outcome;
      li.append(time, what, outcome);
      return li;
    }),
  );
  $('activity-empty').hidden = entries.length > 0;
  $('activity-section').hidden = entries.length === 0 && $('details').hidden;
}

/** What each list last showed: lists are redrawn only when their items change, so the
 * buttons stay put under the cursor. */
const shown = new Map<string, string>();

function showList<T>(section: string, list: string, items: T[], key: (t: T) => string, render: (t: T) => HTMLElement): void {
  $(section).hidden = items.length === 0;
  const k = items.map(key).join(',');
  if (shown.get(list) === k) return;
  shown.set(list, k);
  $(list).replaceChildren(...items.map(render));
}

function element(tag: string, text: string, className?: string): HTMLElement {
  const e = document.createElement(tag);
  e.textContent = text;
  if (className) e.className = className;
  return e;
}

/** A button that sends `req` to the service worker, then redraws. */
function button(label: string, className: string, req: Request): HTMLButtonElement {
  const b = element('button', label, className) as HTMLButtonElement;
  b.type = 'button';
  b.addEventListener('click', async () => {
    await ask(req);
    await refresh();
  });
  return b;
}

/** request_help's pending requests, answerable here too. */
function showHelp(requests: HelpView[]): void {
  showList('help', 'help-list', requests, (r) => r.request, (r) => {
    const li = element('li', '');
    li.dataset.request = r.request;
    const answer = (outcome: 'continued' | 'cancelled') => ({ type: 'help-answer', request: r.request, outcome }) as const;
    li.append(
      element('strong', r.title),
      element('p', r.prompt),
      button('Done', 'help-continued', answer('continued')),
      button('Cancel', 'help-cancelled', answer('cancelled')),
    );
    return li;
  });
}

/** Consent prompts (docs/policy.md, "Consent"): who asks, why, for what; the person answers. */
function showConsents(requests: ConsentView[]): void {
  showList('consent', 'consent-list', requests, (r) => r.request, (r) => {
    const li = element('li', '');
    li.dataset.request = r.request;
    const answer = (allow: boolean, hours?: number) =>
      ({ type: 'consent-answer', request: r.request, allow, ...(hours ? { hours } : {}) }) as const;
    li.append(
      element('strong', `${r.agent} (${r.team})`),
      element('p', r.purpose ? `“${r.purpose}”` : 'No purpose given.', 'purpose'),
      element('p', `It may: ${r.capabilities.join(', ')}. Unanswered by ${new Date(r.deadline).toLocaleTimeString()} means no.`),
      button('Allow once', 'consent-once', answer(true)),
      button('Allow for 1 hour', 'consent-hours', answer(true, 1)),
      button('Allow for 8 hours', 'consent-8h', answer(true, 8)),
      button('Deny', 'consent-deny', answer(false)),
    );
    return li;
  });
}

/** Allowances still running, each withdrawable. */
function showAllowances(list: Allowance[]): void {
  showList('allowed', 'allowances', list, (a) => `${a.agentId}@${a.until}`, (a) => {
    const li = element('li', '');
    li.dataset.agent = a.agentId;
    li.append(
      element('span', `${a.agent} (${a.team}) until ${new Date(a.until).toLocaleTimeString()}`),
      button('Withdraw', 'withdraw', { type: 'allowance-withdraw', agentId: a.agentId }),
    );
    return li;
  });
}

/** Every open session: who, since when, the last action, and End. */
function showSessions(list: SessionSummary[]): void {
  const now = Date.now();
  // Keyed by what changes, so the rows (and End under the cursor) stay put between ticks.
  showList('sessions-section', 'session-list', list, (s) => `${s.id}:${s.lastAction?.at ?? 0}:${s.helpWaiting}:${Math.floor((now - s.startedAt) / 60_000)}`, (s) => {
    const li = element('li', '');
    li.dataset.session = s.id;
    const started = element('span', `started ${duration(s.startedAt, now)} ago`, 'when');
    started.title = exact(s.startedAt);
    const last = s.lastAction
      ? element('span', `last: ${s.lastAction.method.replace(/^tool\./, '')}, ${duration(s.lastAction.at, now)} ago`, 'when')
      : element('span', 'no action yet', 'when');
    li.append(element('strong', s.agent), started, last);
    if (s.purpose) li.append(element('span', `“${s.purpose}”`, 'purpose'));
    if (s.helpWaiting) li.append(element('span', 'waiting for your help', 'waiting'));
    const end = button('End', 'end-session', { type: 'end-session', session: s.id });
    end.setAttribute('aria-label', `End the session of ${s.agent}`);
    li.append(end);
    return li;
  });
}

async function refresh(): Promise<void> {
  show((await ask({ type: 'status' })) as StatusView);
  showSessions((await ask({ type: 'session-list' })) as SessionSummary[]);
  showConsents((await ask({ type: 'consent-list' })) as ConsentView[]);
  showAllowances((await ask({ type: 'allowance-list' })) as Allowance[]);
  showHelp((await ask({ type: 'help-list' })) as HelpView[]);
  showActivity((await ask({ type: 'activity' })) as ActivityEntry[]);
}

function message(text: string, kind: 'ok' | 'error' = 'error'): void {
  $('message').textContent = text;
  $('message').dataset.kind = kind;
}

$('pair-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  message('');
  const link = $<HTMLTextAreaElement>('link').value;
  const r = (await ask({ type: 'pair', link })) as { ok: boolean; message: string };
  if (r.ok) $<HTMLTextAreaElement>('link').value = '';
  else message(r.message);
  await refresh();
});

for (const [id, type] of [
  ['disconnect', 'disconnect'],
  ['connect', 'connect'],
] as const) {
  $(id).addEventListener('click', async () => {
    message('');
    await ask({ type });
    await refresh();
  });
}

// Forgetting asks first: it ends every session and needs a new link to undo.
$('forget').addEventListener('click', () => {
  $('forget-confirm').hidden = false;
  $('forget-no').focus();
});
$('forget-no').addEventListener('click', () => {
  $('forget-confirm').hidden = true;
});
$('forget-yes').addEventListener('click', async () => {
  $('forget-confirm').hidden = true;
  const r = (await ask({ type: 'forget' })) as { ok: boolean; message: string };
  message(r.message, r.ok ? 'ok' : 'error');
  await refresh();
});

$('stop-all').addEventListener('click', async () => {
  const r = (await ask({ type: 'stop-all' })) as { ok: boolean; message: string };
  message(r.message, r.ok ? 'ok' : 'error');
  await refresh();
});

$('clear-activity').addEventListener('click', async () => {
  await ask({ type: 'clear-activity' });
  await refresh();
});

const allowEvaluate = $<HTMLInputElement>('allow-evaluate');
allowEvaluate.addEventListener('change', async () => {
  const s = (await ask({ type: 'set-settings', settings: { allowEvaluate: allowEvaluate.checked } })) as Settings;
  allowEvaluate.checked = s.allowEvaluate;
});
const borrowWait = $<HTMLInputElement>('borrow-wait');
borrowWait.addEventListener('change', async () => {
  const s = (await ask({ type: 'set-settings', settings: { borrowWaitSeconds: Number(borrowWait.value) } })) as Settings;
  borrowWait.value = String(s.borrowWaitSeconds);
});
void ask({ type: 'settings' }).then((s) => {
  allowEvaluate.checked = (s as Settings).allowEvaluate;
  borrowWait.value = String((s as Settings).borrowWaitSeconds);
});

void refresh();
setInterval(() => void refresh(), 1000);
