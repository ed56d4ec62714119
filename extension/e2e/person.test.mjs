// What the browser's person sees, state by state, in real headless Chromium against
// the real latchkeyd (docs/extension.md, "What the person sees"): the popup from
// unpaired to revoked, the Agent Window's page, the mark on an agent's page, the
// borrow prompt and the stopped page. Each state is screenshotted (into
// $LATCHKEY_SCREENSHOTS, docs/screenshots/ when blessed with `npm run screenshots`)
// and checked with axe-core: no serious or critical violation.

import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { accessibilityProblems, api, latchkey, pairThroughPopup, startLatchkeyd, startStack, stopProcess, tempDir, waitFor } from './harness.mjs';

let stack;
let popup;
let shots;

const status = async () => (await popup.locator('#status').getAttribute('aria-label')) ?? '';
const visible = async (selector) => !(await popup.locator(selector).isHidden());
const text = async (selector) => ((await popup.locator(selector).textContent()) ?? '').trim();
const badge = () => stack.browser.worker.evaluate(async () => [await chrome.action.getBadgeText({}), await chrome.action.getTitle({})]);

/** Screenshot `page` (or one element of it) as `name`, and check it with axe. */
async function look(name, page = popup, selector = 'main') {
  await page.locator(selector).first().screenshot({ path: join(shots, `${name}.png`) });
  assert.deepEqual(await accessibilityProblems(page), [], `${name}: serious or critical accessibility problems`);
}

before(async () => {
  stack = await startStack('latchkey-e2e-person-');
  ({ popup } = stack);
  await popup.setViewportSize({ width: 360, height: 900 });
  shots = process.env.LATCHKEY_SCREENSHOTS ?? (await tempDir('latchkey-shots-'));
  await mkdir(shots, { recursive: true });
});

after(async () => {
  await stack?.close();
});

test('unpaired: what Latchkey is, and the pairing form only', async () => {
  await waitFor(async () => (await status()) === 'Not paired', 10_000, 'Not paired');
  assert.match(await text('.tagline'), /Lends this browser to your team's AI agents/);
  assert.match(await text('#status-hint'), /pairing link/);
  assert.ok(await visible('#pair-form'));
  for (const hidden of ['#details', '#actions', '#settings', '#stop-all', '#sessions-section']) assert.ok(!(await visible(hidden)), hidden);
  await look('popup-unpaired');
});

test('connected: the team and its server, the name the team gave this browser, access in days', async () => {
  await pairThroughPopup(stack.daemon, popup, 'Alice laptop');
  assert.equal(await text('#label'), 'Alice laptop');
  // The team's name, from the gateway (the first team is called `default`).
  assert.equal(await text('#team'), 'default');
  assert.match(await text('#expires'), /\(in (89|90) days\)/);
  assert.ok(await popup.locator('#expires').getAttribute('title'), 'the exact time on hover');
  assert.equal(await text('#contact'), 'now');
  assert.ok(!(await visible('#renewal')), 'no renewal line while nothing is due');
  assert.ok(!(await visible('#stop-all')), 'Stop all only when something runs');
  assert.ok(!(await visible('#pair-form')));
  await waitFor(async () => JSON.stringify(await badge()) === JSON.stringify(['', 'Latchkey: connected; no agent is working']), 5_000, 'the connected badge');
  await look('popup-connected');
});

test('an agent at work: its row in the popup, the icon, its window and the mark on its pages', async () => {
  const session = await latchkey(stack.agentEnv, ['session', 'start', '--purpose', 'Compare train fares for Friday']);
  const row = popup.locator(`#session-list li[data-session="${session.id}"]`);
  await waitFor(() => row.count(), 10_000, 'the session in the popup');
  assert.match((await row.textContent()) ?? '', /e2e-agent.*started less than a minute ago.*no action yet.*Compare train fares/s);
  assert.ok(await visible('#stop-all'));
  await waitFor(async () => JSON.stringify(await badge()) === JSON.stringify(['1', 'Latchkey: 1 agent is working in this browser']), 5_000, 'the icon counts the agent');
  await look('popup-agent-working');

  const windowPage = await waitFor(
    () => stack.browser.context.pages().find((p) => p.url().includes(`agent-window.html?session=${session.id}`)),
    10_000,
    'the Agent Window page',
  );
  await waitFor(async () => /e2e-agent/.test((await windowPage.locator('#headline').textContent()) ?? ''), 5_000, 'the agent named');
  assert.equal(await windowPage.locator('#purpose').textContent(), 'Compare train fares for Friday');
  await windowPage.setViewportSize({ width: 800, height: 600 });
  await look('agent-window', windowPage, 'body');

  const env = { ...stack.agentEnv, LATCHKEY_SESSION: session.id };
  await latchkey(env, ['navigate', `${stack.site.base}/a`]);
  const page = await waitFor(() => stack.browser.context.pages().find((p) => p.url() === `${stack.site.base}/a`), 10_000, 'the agent page');
  await waitFor(() => page.locator('latchkey-agent-window').count(), 10_000, 'the mark');
  await page.setViewportSize({ width: 800, height: 500 });
  // The mark lives in a closed shadow root: a picture is the way to see it.
  await page.screenshot({ path: join(shots, 'agent-page-mark.png') });
  await waitFor(async () => /last: navigate/.test((await row.textContent()) ?? ''), 5_000, 'the last action');
  await latchkey(stack.agentEnv, ['session', 'stop', session.id]);
  await waitFor(async () => (await badge())[0] === '', 5_000, 'the icon clears');
});

test('the borrow prompt names the agent and the tab', async () => {
  const session = await latchkey(stack.agentEnv, ['session', 'start']);
  const env = { ...stack.agentEnv, LATCHKEY_SESSION: session.id };
  const user = await latchkey(env, ['tab', 'list', '--scope', 'user']);
  const tab = user.tabs[0];
  const prompt = stack.browser.context.waitForEvent('page', { predicate: (p) => p.url().includes('confirm.html'), timeout: 10_000 });
  const asking = latchkey(env, ['tab', 'borrow', String(tab.tab_id)]);
  asking.catch(() => undefined);
  const confirm = await prompt;
  await waitFor(async () => /^e2e-agent/.test((await confirm.locator('#agent').textContent()) ?? ''), 5_000, 'the agent named');
  await look('borrow-prompt', confirm, 'body');
  await confirm.evaluate(() => document.getElementById('deny').click()).catch(() => undefined);
  await assert.rejects(asking);
  await latchkey(stack.agentEnv, ['session', 'stop', session.id]);
});

test('paused: agents cannot reach the browser until the person connects', async () => {
  await popup.click('#disconnect');
  await waitFor(async () => (await status()) === 'Paused', 10_000, 'Paused');
  assert.match(await text('#status-hint'), /no agent can reach this browser/);
  assert.ok(await visible('#connect'));
  assert.ok(!(await visible('#disconnect')));
  await look('popup-paused');
  await popup.click('#connect');
  await waitFor(async () => (await status()) === 'Connected', 15_000, 'Connected again');
});

test('offline: when it last connected and when it tries again', async () => {
  await stopProcess(stack.daemon.child);
  await waitFor(async () => (await status()).startsWith('Offline'), 15_000, 'Offline');
  await waitFor(async () => /Last connected .*Trying again (in \d+ s|now)/.test(await text('#status-hint')), 5_000, 'the retry line');
  await waitFor(async () => (await badge())[0] === 'off', 5_000, 'the off badge');
  await look('popup-offline');
  const { token } = stack.daemon;
  stack.daemon = { ...(await startLatchkeyd(stack.dataDir, stack.daemon.addr)), token };
  await waitFor(async () => (await status()) === 'Connected', 45_000, 'Connected again');
});

test('forget asks first, then removes this browser from the team too', async () => {
  const devices = await api(stack.daemon.url, stack.daemon.token, 'GET', '/v1/admin/devices');
  const device = devices.body.devices.find((d) => d.label === 'Alice laptop' && !d.revoked_at);
  assert.ok(device, JSON.stringify(devices.body));
  await popup.click('#forget');
  assert.ok(await visible('#forget-confirm'));
  await look('popup-forget-confirm');
  await popup.click('#forget-no');
  assert.ok(!(await visible('#forget-confirm')));
  assert.equal(await status(), 'Connected', 'Cancel changes nothing');
  await popup.click('#forget');
  await popup.click('#forget-yes');
  await waitFor(async () => (await status()) === 'Not paired', 10_000, 'Not paired');
  assert.match(await text('#message'), /removed from your team too/);
  assert.equal(await popup.locator('#message').getAttribute('data-kind'), 'ok');
  const after = await api(stack.daemon.url, stack.daemon.token, 'GET', `/v1/admin/devices/${device.id}`);
  assert.ok(after.body.revoked_at, 'the server revoked it');
  const audit = await api(stack.daemon.url, stack.daemon.token, 'GET', '/v1/admin/audit?action=device.unpair');
  assert.ok(audit.body.events.some((e) => e.target === `device:${device.id}` && e.actor === `device:${device.id}`), JSON.stringify(audit.body));
});

test('revoked: the reason and the way back, and nothing stale', async () => {
  const id = await pairThroughPopup(stack.daemon, popup, 'Alice laptop');
  const r = await api(stack.daemon.url, stack.daemon.token, 'DELETE', `/v1/admin/devices/${id}`);
  assert.equal(r.status, 200);
  await waitFor(async () => (await status()).includes('revoked'), 10_000, 'revoked');
  assert.match(await text('#status-hint'), /revoked this browser’s access/);
  for (const gone of ['#expires', '#contact', '#renewal', '#disconnect', '#settings', '#stop-all']) assert.ok(!(await visible(gone)), gone);
  assert.ok(await visible('#pair-form'));
  await waitFor(async () => (await badge())[0] === '!', 5_000, 'the revoked badge');
  await look('popup-revoked');
});

test('the stopped page says what was refused, as text', async () => {
  const page = await stack.browser.context.newPage();
  await page.setViewportSize({ width: 800, height: 500 });
  await page.goto(`chrome-extension://${stack.browser.extensionId}/blocked.html?host=casino.example&reason=site_blocked&pattern=*.casino.example`);
  assert.match((await page.locator('#why').textContent()) ?? '', /\*\.casino\.example/);
  await look('blocked-page', page, 'body');
  await page.close();
});
