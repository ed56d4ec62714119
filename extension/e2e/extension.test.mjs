// The extension in real headless Chromium against the real latchkeyd.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { api, latchkey, pairThroughPopup, startLatchkeyd, startStack, stopProcess, waitFor } from './harness.mjs';

let stack;
let daemon;
let dataDir;
let site;
let browser;
let popup;
let agentEnv;
let deviceId;
let configFile;

/** Click a button in a page that closes itself on the click. */
async function press(page, selector) {
  try {
    await page.evaluate((s) => document.querySelector(s).click(), selector);
  } catch (e) {
    if (!/closed/.test(String(e))) throw e;
  }
}

const status = async () => (await popup.locator('#status').getAttribute('aria-label')) ?? '';

before(async () => {
  // Grants ask for renewal after 2 s, so rotation happens during the run.
  stack = await startStack('latchkey-e2e-', '[limits]\nrenew_after_secs = 2\n');
  ({ daemon, dataDir, site, browser, popup, agentEnv, configFile } = stack);
});

after(async () => {
  if (stack) stack.daemon = daemon;
  await stack?.close();
});

test('a malformed link is refused in the popup and nothing is stored', async () => {
  await popup.fill('#link', 'https://example.com/extension#short');
  await popup.click('#pair');
  await waitFor(async () => (await popup.locator('#message').textContent())?.includes('wss://'), 5_000, 'error message');
  assert.equal(await status(), 'Not paired');
});

test('pairing by pasting the link into the popup connects the browser', async () => {
  deviceId = await pairThroughPopup(daemon, popup, 'E2E browser');
  assert.match(deviceId, /^[a-f0-9]{32}$/);
  const browsers = await latchkey(agentEnv, ['browsers']);
  const me = browsers.browsers.find((b) => b.id === deviceId);
  assert.ok(me, 'latchkey browsers lists the device');
  assert.equal(me.online, true);
  assert.equal(me.label, 'E2E browser');
});

test('the grant rotates while the connection stays up', async () => {
  const token = async () =>
    (await browser.worker.evaluate(() => chrome.storage.local.get('latchkey.credential')))['latchkey.credential']?.token;
  const first = await token();
  await waitFor(async () => (await token()) !== first, 15_000, 'a renewal');
  const second = await token();
  await waitFor(async () => (await token()) !== second, 15_000, 'another renewal');
  const audit = await api(daemon.url, daemon.token, 'GET', '/v1/admin/audit?limit=200');
  const mine = audit.body.events.filter((e) => e.target === `device:${deviceId}`);
  assert.ok(mine.filter((e) => e.action === 'device.renew').length >= 2, 'renewals audited');
  assert.equal(mine.filter((e) => e.action === 'device.connect').length, 1, 'one connection throughout');
  assert.equal(mine.filter((e) => e.action === 'device.disconnect').length, 0);
  assert.equal(await status(), 'Connected');
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

  // The window opens behind the person's, on our page saying who opened it.
  const landing = await waitFor(() => browser.context.pages().find((p) => p.url().includes(`agent-window.html?session=${session.id}`)), 10_000, 'the Agent Window page');
  await waitFor(async () => /e2e-agent/.test((await landing.locator('#agent').textContent()) ?? ''), 10_000, 'the agent named');
  const focused = await browser.worker.evaluate((id) => chrome.windows.get(id).then((w) => w.focused), session.agent_window_id);
  assert.equal(focused, false, 'the Agent Window does not take focus unasked');

  // A tab the person opens in the Agent Window is theirs: it moves to a window of theirs.
  const personal = await browser.worker.evaluate((windowId) => chrome.tabs.create({ windowId, url: 'about:blank' }).then((t) => t.id), session.agent_window_id);
  await waitFor(
    async () => (await browser.worker.evaluate((id) => chrome.tabs.get(id).then((t) => t.windowId), personal)) !== session.agent_window_id,
    10_000,
    'the person\'s tab moved out of the Agent Window',
  );
  assert.ok(!(await latchkey(env, ['tab', 'list', '--scope', 'agent'])).tabs.some((t) => t.tab_id === personal));
  await browser.worker.evaluate((id) => chrome.tabs.remove(id), personal);

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

test('the Agent Window is resized, and a tab emulates a phone until off', async () => {
  const session = await latchkey(agentEnv, ['session', 'start', '--width', '900', '--height', '700']);
  const env = { ...agentEnv, LATCHKEY_SESSION: session.id };
  const call = (method, params) => latchkey(env, ['call', method, '--params', JSON.stringify(params)]);
  const resized = await call('tool.window_resize', { width: 800, height: 600 });
  assert.deepEqual(resized, { window_id: session.agent_window_id, width: 800, height: 600 });
  const size = await browser.worker.evaluate((id) => chrome.windows.get(id).then((w) => [w.width, w.height]), session.agent_window_id);
  assert.deepEqual(size, [800, 600]);

  await latchkey(env, ['navigate', `${site.base}/c`]);
  const page = await waitFor(() => browser.context.pages().find((p) => p.url() === `${site.base}/c`), 10_000, 'the page');
  // The screen: a mobile page without a viewport tag lays out 980 px wide, as phones do.
  const looks = () => page.evaluate(() => [screen.width, devicePixelRatio, navigator.userAgent, navigator.maxTouchPoints]);
  const [width, , agent] = await looks();
  const phone = { width: 390, height: 844, device_scale_factor: 2, mobile: true, user_agent: 'LatchkeyPhone/1.0', touch: true, max_touch_points: 5 };
  const applied = await call('tool.emulate', { overrides: phone });
  assert.deepEqual([applied.cleared, applied.applied], [false, phone]);
  assert.deepEqual(await looks(), [390, 2, 'LatchkeyPhone/1.0', 5]);
  // A later call merges into what the tab has.
  const merged = await call('tool.emulate', { overrides: { user_agent: 'Other/2.0' } });
  assert.deepEqual(merged.applied, { ...phone, user_agent: 'Other/2.0' });
  assert.deepEqual(await looks(), [390, 2, 'Other/2.0', 5]);
  const cleared = await call('tool.emulate', { off: true });
  assert.deepEqual([cleared.cleared, cleared.applied], [true, undefined]);
  assert.deepEqual(await looks(), [width, 1, agent, 0]);
  await latchkey(agentEnv, ['session', 'stop', session.id]);
});

test('a user tab is borrowed only with the person\'s consent, and returned to its place', async () => {
  const session = await latchkey(agentEnv, ['session', 'start']);
  const env = { ...agentEnv, LATCHKEY_SESSION: session.id };
  // The person opens a tab in their own window (not the focused Agent Window).
  const before = await latchkey(env, ['tab', 'list', '--scope', 'user']);
  const ownWindow = before.tabs[0].window_id;
  const url = `${site.base}/c`;
  const mineId = await browser.worker.evaluate(
    ([windowId, u]) => chrome.tabs.create({ windowId, url: u, active: true }).then((t) => t.id),
    [ownWindow, url],
  );
  const tab = await waitFor(
    async () => (await latchkey(env, ['tab', 'list', '--scope', 'user'])).tabs.find((t) => t.tab_id === mineId && t.url === url),
    10_000,
    'the person\'s tab loaded',
  );
  const userTabs = { tabs: [tab] };
  assert.ok(tab, `the person's tab is listed: ${JSON.stringify(userTabs)}`);

  // Allow: the tab moves into the Agent Window and can be read there.
  const prompt = browser.context.waitForEvent('page', { predicate: (p) => p.url().includes('confirm.html'), timeout: 10_000 });
  const borrowing = latchkey(env, ['tab', 'borrow', String(tab.tab_id)]);
  borrowing.catch(() => undefined); // awaited below; keep an early refusal from going unhandled
  const confirm = await prompt;
  await confirm.waitForSelector('#allow');
  assert.match((await confirm.locator('#url').textContent()) ?? '', /\/c$/);
  // It names who asks, and gives the person a minute.
  await waitFor(async () => /^e2e-agent/.test((await confirm.locator('#agent').textContent()) ?? ''), 5_000, 'the agent named');
  assert.match((await confirm.locator('#countdown').textContent()) ?? '', /in (59|60) s/);
  await press(confirm, '#allow');
  const borrowed = await borrowing;
  assert.equal(borrowed.tab_id, tab.tab_id);
  assert.equal(borrowed.original_window_id, tab.window_id);
  assert.equal(borrowed.agent_window_id, session.agent_window_id);
  const html = await latchkey(env, ['call', 'tool.get_html', '--params', JSON.stringify({ tab_id: tab.tab_id })]);
  assert.match(html.html, /Charlie content/);

  // Return: back to its window, at its index.
  const returned = await latchkey(env, ['tab', 'return', String(tab.tab_id)]);
  assert.equal(returned.returned_to_window_id, borrowed.original_window_id);
  assert.equal(returned.returned_to_index, borrowed.original_index);
  const placed = await browser.worker.evaluate((id) => chrome.tabs.get(id), tab.tab_id);
  assert.equal(placed.windowId, borrowed.original_window_id);
  assert.equal(placed.index, borrowed.original_index);

  // Deny: `cancelled`, and the tab stays where it is.
  const prompt2 = browser.context.waitForEvent('page', { predicate: (p) => p.url().includes('confirm.html'), timeout: 10_000 });
  const denied = latchkey(env, ['tab', 'borrow', String(tab.tab_id)]);
  denied.catch(() => undefined);
  const confirm2 = await prompt2;
  await confirm2.waitForSelector('#deny');
  await press(confirm2, '#deny');
  await assert.rejects(denied, (e) => {
    const err = JSON.parse(e.stdout).error;
    return err.code === 'cancelled' && err.data?.reason === 'borrow_denied';
  });
  assert.equal((await browser.worker.evaluate((id) => chrome.tabs.get(id), tab.tab_id)).windowId, borrowed.original_window_id);
  // Nobody answers within the agent's own 1.5 s: timed out, told apart from a no.
  const unanswered = latchkey(env, ['call', 'tool.tab_borrow', '--params', JSON.stringify({ tab_id: tab.tab_id, timeout_ms: 1500 })]);
  await assert.rejects(unanswered, (e) => {
    const err = JSON.parse(e.stdout).error;
    return err.code === 'cancelled' && err.data?.reason === 'borrow_timed_out';
  });
  assert.equal((await browser.worker.evaluate((id) => chrome.tabs.get(id), tab.tab_id)).windowId, borrowed.original_window_id);

  await latchkey(agentEnv, ['session', 'stop', session.id]);
  await browser.worker.evaluate((id) => chrome.tabs.remove(id), mineId);
});

test('closing the Agent Window ends the session', async () => {
  const session = await latchkey(agentEnv, ['session', 'start']);
  await browser.worker.evaluate((id) => chrome.windows.remove(id), session.agent_window_id);
  await waitFor(
    async () => !(await latchkey(agentEnv, ['session', 'list'])).sessions.some((s) => s.id === session.id),
    10_000,
    'session gone',
  );
});

test('the popup lists each session with its agent, and End ends that one', async () => {
  const session = await latchkey(agentEnv, ['session', 'start', '--purpose', 'Compare prices']);
  const row = popup.locator(`#session-list li[data-session="${session.id}"]`);
  await waitFor(() => row.count(), 10_000, 'the session listed');
  const text = (await row.textContent()) ?? '';
  assert.match(text, /e2e-agent/);
  assert.match(text, /Compare prices/);
  assert.match(text, /started less than a minute ago/);
  await row.locator('.end-session').click();
  await waitFor(() => row.count().then((n) => n === 0), 10_000, 'the row gone');
  const ended = await latchkey({ ...agentEnv, LATCHKEY_SESSION: session.id }, ['snapshot']).then(
    () => assert.fail('the session still answers'),
    (e) => JSON.parse(e.stdout).error,
  );
  assert.deepEqual([ended.code, ended.data?.reason], ['session_ended', 'user_stopped']);
});

test('restarting latchkeyd brings the extension back by itself', async () => {
  await stopProcess(daemon.child);
  await waitFor(async () => (await status()) !== 'Connected', 15_000, 'offline after the server stops');
  daemon = { ...(await startLatchkeyd(dataDir, daemon.addr, configFile)), token: daemon.token };
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
  // Remembered for good: a service-worker restart does not reconnect or renew.
  const stored = await browser.worker.evaluate(() => chrome.storage.local.get('latchkey.credential'));
  assert.equal(stored['latchkey.credential'].stopped, 'revoked');
});
