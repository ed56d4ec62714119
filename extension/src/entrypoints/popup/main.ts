// The popup: pair with a link, see the connection, disconnect or forget.

import { browser } from 'wxt/browser';
import type { ActivityEntry } from '../../lib/activity';
import type { Allowance, ConsentView } from '../../lib/consent';
import { type HelpView, type Reply, type Request, type SessionSummary, STATUS_TEXT, type StatusView } from '../../lib/messages';
import { duration } from '../../lib/agentinfo';
import type { Settings } from '../../lib/settings';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

async function ask(req: Request): Promise<Reply> {
  return (await browser.runtime.sendMessage(req)) as Reply;
}

function show(view: StatusView): void {
  const status = $('status');
  const text = STATUS_TEXT[view.status];
  status.textContent = text;
  status.setAttribute('aria-label', text);
  status.dataset.state = view.status;
  const paired = view.deviceId !== undefined;
  $('details').hidden = !paired;
  $('actions').hidden = !paired;
  $('pair-form').hidden = paired && !['rejected', 'expired', 'revoked'].includes(view.status);
  $('host').textContent = view.host ?? '';
  $('device').textContent = view.deviceId ?? '';
  $('label').textContent = view.label ?? '';
  $('expires').textContent = view.expiresAt ?? '';
  $('renewal').textContent = view.renewal ?? '';
  $('sessions').textContent = String(view.sessions);
  $('stop-all').hidden = !['connected', 'connecting', 'offline', 'renewing'].includes(view.status);
  $('disconnect').hidden = view.status === 'disconnected';
  $('connect').hidden = view.status !== 'disconnected';
}

function showActivity(entries: ActivityEntry[]): void {
  const list = $('activity');
  list.replaceChildren(
    ...entries.map((e) => {
      const li = document.createElement('li');
      li.dataset.outcome = e.outcome;
      const time = document.createElement('time');
      time.dateTime = new Date(e.at).toISOString();
      time.textContent = new Date(e.at).toLocaleTimeString();
      const what = document.createElement('span');
      what.textContent = `${e.method.replace(/^tool\./, '')}${e.tab !== undefined ? ` · tab ${e.tab}` : ''}${e.reason ? ` · ${e.reason.replace(/_/g, ' ')}` : ''}`;
      const outcome = document.createElement('span');
      outcome.className = 'outcome';
      outcome.textContent = e.outcome;
      li.append(time, what, outcome);
      return li;
    }),
  );
  $('activity-empty').hidden = entries.length > 0;
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
    started.title = new Date(s.startedAt).toLocaleString();
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

function message(text: string): void {
  $('message').textContent = text;
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
  ['forget', 'forget'],
] as const) {
  $(id).addEventListener('click', async () => {
    message('');
    await ask({ type });
    await refresh();
  });
}

$('stop-all').addEventListener('click', async () => {
  const r = (await ask({ type: 'stop-all' })) as { ok: boolean; message: string };
  $('message').textContent = r.message;
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
