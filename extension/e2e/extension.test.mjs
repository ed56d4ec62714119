// The extension in real headless Chromium against the real latchkeyd.

import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import {
  api,
  latchkey,
  launchBrowser,
  startLatchkeyd,
  startSite,
  stopProcess,
  tempDir,
  waitFor,
} from './harness.mjs';

let daemon;
let dataDir;
let site;
let browser;
let popup;
let agentEnv;
let deviceId;

const status = async () => (await popup.locator('#status').getAttribute('aria-label')) ?? '';

before(async () => {
  dataDir = await tempDir('latchkey-e2e-');
  daemon = await startLatchkeyd(dataDir);
  site = await startSite();
  browser = await launchBrowser();
  popup = await browser.context.newPage();
  await popup.goto(`chrome-extension://${browser.extensionId}/popup.html`);
  const agent = await api(daemon.url, daemon.token, 'POST', '/v1/admin/tokens', { name: 'e2e-agent', role: 'agent' });
  assert.equal(agent.status, 201);
  agentEnv = { LATCHKEY_URL: daemon.url, LATCHKEY_TOKEN: agent.body.token };
});

after(async () => {
  await browser?.close();
  site?.server.close();
  if (daemon) await stopProcess(daemon.child);
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

test('a malformed link is refused in the popup and nothing is stored', async () => {
  await popup.fill('#link', 'https://example.com/extension#short');
  await popup.click('#pair');
  await waitFor(async () => (await popup.locator('#message').textContent())?.includes('wss://'), 5_000, 'error message');
  assert.equal(await status(), 'Not paired');
});

test('pairing by pasting the link into the popup connects the browser', async () => {
  const pairing = await api(daemon.url, daemon.token, 'POST', '/v1/admin/pairings', { label: 'E2E browser' });
  assert.equal(pairing.status, 201);
  await popup.fill('#link', pairing.body.link);
  await popup.click('#pair');
  await waitFor(async () => (await status()) === 'Connected', 15_000, 'Connected in the popup');
  deviceId = (await popup.locator('#device').textContent())?.trim();
  assert.match(deviceId, /^[a-f0-9]{32}$/);
  const browsers = await latchkey(agentEnv, ['browsers']);
  const me = browsers.browsers.find((b) => b.id === deviceId);
  assert.ok(me, 'latchkey browsers lists the device');
  assert.equal(me.online, true);
  assert.equal(me.label, 'E2E browser');
});

test('a session drives an Agent Window: navigation, html, screenshot, tabs, stop', async () => {
  const windowsBefore = await browser.worker.evaluate(() => chrome.windows.getAll().then((w) => w.length));
  const session = await latchkey(agentEnv, ['session', 'start', '--width', '900', '--height', '700']);
  assert.ok(session.agent_window_id);
  const env = { ...agentEnv, LATCHKEY_SESSION: session.id };
  await waitFor(
    async () => (await browser.worker.evaluate(() => chrome.windows.getAll().then((w) => w.length))) === windowsBefore + 1,
    10_000,
    'Agent Window opened',
  );

  const a = await latchkey(env, ['navigate', `${site.base}/a`]);
  assert.equal(a.reached, 'load');
  assert.equal(a.final_url, `${site.base}/a`);
  const html = await latchkey(env, ['call', 'tool.get_html', '--params', '{}']);
  assert.match(html.html, /Alpha content/);
  assert.equal(html.truncated, false);

  await latchkey(env, ['navigate', `${site.base}/b`, '--wait-until', 'domcontentloaded']);
  const back = await latchkey(env, ['back']);
  assert.equal(back.final_url, `${site.base}/a`);
  const forward = await latchkey(env, ['forward']);
  assert.equal(forward.final_url, `${site.base}/b`);
  const reload = await latchkey(env, ['reload']);
  assert.equal(reload.reached, 'load');
  const waited = await latchkey(env, ['wait-for-navigation']);
  assert.equal(waited.reached, 'load');

  const shot = await latchkey(env, ['screenshot', '--out', `${dataDir}/shot.png`]);
  assert.ok(shot.width > 0 && shot.width <= 900, `width ${shot.width}`);
  assert.ok(shot.height > 0 && shot.height <= 700, `height ${shot.height}`);
  const { readFile } = await import('node:fs/promises');
  const png = await readFile(`${dataDir}/shot.png`);
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.equal(png.readUInt32BE(16), shot.width);

  const created = await latchkey(env, ['tab', 'create', `${site.base}/c`]);
  const agentTabs = await latchkey(env, ['tab', 'list', '--scope', 'agent']);
  assert.equal(agentTabs.tabs.length, 2);
  assert.ok(agentTabs.tabs.every((t) => t.scope === 'agent'));
  const first = agentTabs.tabs.find((t) => t.tab_id !== created.tab_id);
  await latchkey(env, ['tab', 'select', String(first.tab_id)]);
  await latchkey(env, ['tab', 'close', String(created.tab_id)]);
  assert.equal((await latchkey(env, ['tab', 'list', '--scope', 'agent'])).tabs.length, 1);

  // The person's own tabs are out of scope for page tools.
  const userTabs = await latchkey(env, ['tab', 'list', '--scope', 'user']);
  const userTab = userTabs.tabs[0];
  assert.ok(userTab, 'the popup page is a user tab');
  await assert.rejects(
    latchkey(env, ['call', 'tool.get_html', '--params', JSON.stringify({ tab_id: userTab.tab_id })]),
    (e) => JSON.parse(e.stdout).error.code === 'permission_denied',
  );

  const stopped = await latchkey(agentEnv, ['session', 'stop', session.id]);
  assert.equal(stopped.stopped, true);
  await waitFor(
    async () => (await browser.worker.evaluate(() => chrome.windows.getAll().then((w) => w.length))) === windowsBefore,
    10_000,
    'Agent Window closed',
  );
});

test('closing the Agent Window ends the session', async () => {
  const session = await latchkey(agentEnv, ['session', 'start']);
  await browser.worker.evaluate((id) => chrome.windows.remove(id), session.agent_window_id);
  await waitFor(async () => (await latchkey(agentEnv, ['session', 'list'])).sessions.length === 0, 10_000, 'session gone');
});

test('restarting latchkeyd brings the extension back by itself', async () => {
  await stopProcess(daemon.child);
  await waitFor(async () => (await status()) !== 'Connected', 15_000, 'offline after the server stops');
  daemon = { ...(await startLatchkeyd(dataDir, daemon.addr)), token: daemon.token };
  await waitFor(async () => (await status()) === 'Connected', 45_000, 'reconnected');
  const browsers = await latchkey(agentEnv, ['browsers']);
  assert.equal(browsers.browsers.find((b) => b.id === deviceId)?.online, true);
});

test('revoking the device shows "revoked" and the extension stops reconnecting', async () => {
  const r = await api(daemon.url, daemon.token, 'DELETE', `/v1/admin/devices/${deviceId}`);
  assert.equal(r.status, 200);
  await waitFor(async () => (await status()).includes('revoked'), 10_000, 'revoked in the popup');
  const state = await browser.worker.evaluate(() => chrome.storage.session.get('latchkey.status'));
  assert.equal(state['latchkey.status'], 'revoked');
});
