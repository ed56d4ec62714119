// The popup: pair with a link, see the connection, disconnect or forget.

import { browser } from 'wxt/browser';
import { type Reply, type Request, STATUS_TEXT, type StatusView } from '../../lib/messages';

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
  $('disconnect').hidden = view.status === 'disconnected';
  $('connect').hidden = view.status !== 'disconnected';
}

async function refresh(): Promise<void> {
  show((await ask({ type: 'status' })) as StatusView);
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

void refresh();
setInterval(() => void refresh(), 1000);
