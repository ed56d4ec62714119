// The popup: pair with a link, see the connection, disconnect or forget.

import { browser } from 'wxt/browser';
import type { ActivityEntry } from '../../lib/activity';
import { type HelpView, type Reply, type Request, STATUS_TEXT, type StatusView } from '../../lib/messages';
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
      what.textContent = `${e.method.replace(/^tool\./, '')}${e.tab !== undefined ? ` · tab ${e.tab}` : ''}`;
      const outcome = document.createElement('span');
      outcome.className = 'outcome';
      outcome.textContent = e.outcome;
      li.append(time, what, outcome);
      return li;
    }),
  );
  $('activity-empty').hidden = entries.length > 0;
}

/** request_help's pending requests, answerable here too. */
let shownHelp = '';

function showHelp(requests: HelpView[]): void {
  $('help').hidden = requests.length === 0;
  // Redraw only when the requests change, so the buttons stay put under the cursor.
  const key = requests.map((r) => r.request).join(',');
  if (key === shownHelp) return;
  shownHelp = key;
  $('help-list').replaceChildren(
    ...requests.map((r) => {
      const li = document.createElement('li');
      li.dataset.request = r.request;
      const title = document.createElement('strong');
      title.textContent = r.title;
      const prompt = document.createElement('p');
      prompt.textContent = r.prompt;
      const button = (label: string, outcome: 'continued' | 'cancelled') => {
        const b = document.createElement('button');
        b.type = 'button';
        b.textContent = label;
        b.className = `help-${outcome}`;
        b.addEventListener('click', async () => {
          await ask({ type: 'help-answer', request: r.request, outcome });
          await refresh();
        });
        return b;
      };
      li.append(title, prompt, button('Done', 'continued'), button('Cancel', 'cancelled'));
      return li;
    }),
  );
}

async function refresh(): Promise<void> {
  show((await ask({ type: 'status' })) as StatusView);
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
void ask({ type: 'settings' }).then((s) => {
  allowEvaluate.checked = (s as Settings).allowEvaluate;
});

void refresh();
setInterval(() => void refresh(), 1000);
