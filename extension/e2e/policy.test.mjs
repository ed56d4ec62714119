// The person's say and the browser's enforcement, in real headless Chromium with our
// extension against the real latchkeyd (docs/policy.md, "Consent" and "Enforcement in
// the browser"): a policy that asks is answered in the popup (allow once, deny, allow
// for an hour, withdrawn); a redirect the gateway never sees to a blocked site is
// stopped in the agent tab and reported; a blocked tab_create never reaches the browser;
// a tab of the person's on a blocked site is not lent to the session.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { api, latchkey, pairThroughPopup, startStack, waitFor } from './harness.mjs';

let stack;
let deviceId;

const errorOf = (e) => JSON.parse(e.stdout).error;
const policy = (body) => api(stack.daemon.url, stack.daemon.token, 'PUT', `/v1/admin/devices/${deviceId}/policy`, body);
const prompts = () => stack.popup.locator('#consent-list li');

before(async () => {
  stack = await startStack('latchkey-e2e-policy-');
  deviceId = await pairThroughPopup(stack.daemon, stack.popup);
});

after(async () => {
  await stack?.close();
});

/**
 * Start a session in the background and wait until the popup shows its prompt;
 * resolves with `{ started }`, the start's own promise (wrapped, so that awaiting
 * this does not wait for the start).
 */
async function startAsked(purpose) {
  const started = latchkey(stack.agentEnv, ['session', 'start', ...(purpose ? ['--purpose', purpose] : [])]);
  started.catch(() => undefined);
  await waitFor(async () => (await prompts().count()) === 1, 15_000, 'the consent prompt');
  return { started };
}

/**
 * Answer the one prompt shown and wait until the popup has taken it away, so that
 * the next step never sees (or clicks) an answered prompt the popup has yet to redraw.
 */
async function answer(button) {
  await stack.popup.click(`#consent-list .${button}`);
  await waitFor(async () => (await prompts().count()) === 0, 5_000, 'the answered prompt gone');
}

test('a policy that asks: the person allows once, denies, allows for an hour, then withdraws it', async () => {
  const { agentEnv, popup } = stack;
  assert.equal((await policy({ consent: 'ask', capabilities: ['read', 'navigate'] })).status, 200);

  const once = (await startAsked('compare laptop prices')).started;
  const prompt = await prompts().first().textContent();
  assert.match(prompt, /e2e-agent \(default\)/);
  assert.match(prompt, /compare laptop prices/);
  assert.match(prompt, /session, read, navigate/);
  // The agent sees its session waiting for the person.
  const waiting = await latchkey(agentEnv, ['session', 'list']);
  assert.deepEqual(waiting.sessions.map((s) => s.phase), ['consent_pending']);
  await answer('consent-once');
  const session = await once;
  assert.equal(session.phase, 'open');
  assert.ok(session.agent_window_id);
  await latchkey(agentEnv, ['session', 'stop', session.id]);

  const refused = (await startAsked()).started;
  await answer('consent-deny');
  await assert.rejects(refused, (e) => {
    const error = errorOf(e);
    return error.code === 'permission_denied' && error.data.reason === 'consent_denied';
  });
  assert.deepEqual((await latchkey(agentEnv, ['session', 'list'])).sessions, []);

  // An hour's allowance: the next start asks nobody, and the popup lists it.
  const hour = (await startAsked('restock')).started;
  await answer('consent-hours');
  await latchkey(agentEnv, ['session', 'stop', (await hour).id]);
  // Nobody answers: the start returns only because the allowance holds.
  const unasked = await latchkey(agentEnv, ['session', 'start']);
  assert.equal(unasked.phase, 'open');
  assert.equal(await prompts().count(), 0);
  await latchkey(agentEnv, ['session', 'stop', unasked.id]);
  await waitFor(async () => (await popup.locator('#allowances li').count()) === 1, 5_000, 'the allowance listed');
  assert.match(await popup.locator('#allowances li').textContent(), /e2e-agent \(default\) until/);
  await popup.click('#allowances .withdraw');
  await waitFor(async () => (await popup.locator('#allowances li').count()) === 0, 5_000, 'the allowance withdrawn');
  const askedAgain = (await startAsked()).started;
  await answer('consent-deny');
  await assert.rejects(askedAgain);

  const audit = await api(stack.daemon.url, stack.daemon.token, 'GET', '/v1/admin/audit?limit=50');
  const details = audit.body.events.map((e) => `${e.action} ${e.detail ?? ''}`);
  assert.ok(details.some((d) => /^session\.start .*purpose:"compare laptop prices" consent:once/.test(d)), details.join('\n'));
  assert.ok(details.some((d) => /^session\.start .*consent:remembered/.test(d)), details.join('\n'));
  assert.ok(details.some((d) => /^policy\.deny consent_denied/.test(d)), details.join('\n'));
  assert.equal((await policy({})).status, 200);
});

test('a redirect to a blocked site is stopped in the agent tab; a blocked tab_create never reaches the browser; a tab on a blocked site is not lent', async () => {
  const { agentEnv, site, browser, daemon } = stack;
  assert.equal((await policy({ block_sites: ['localhost'] })).status, 200);
  const port = new URL(site.base).port;
  const session = await latchkey(agentEnv, ['session', 'start']);
  const env = { ...agentEnv, LATCHKEY_SESSION: session.id };
  const blockedPage = `chrome-extension://${browser.extensionId}/blocked.html`;

  // The gateway sees only the allowed first hop; the browser stops the second.
  const hop = `${site.base}/redirect?to=${encodeURIComponent(`http://localhost:${port}/b`)}`;
  await latchkey(env, ['navigate', hop]).catch(() => undefined);
  const tab = await waitFor(async () => {
    const tabs = (await latchkey(env, ['tab', 'list', '--scope', 'agent'])).tabs;
    return tabs.length === 1 && tabs[0].url?.startsWith(blockedPage) ? tabs[0] : undefined;
  }, 15_000, 'the agent tab on the blocked page');
  assert.match(tab.url, /host=localhost/);
  assert.match(tab.url, /reason=site_blocked/);
  const shown = await latchkey(env, ['call', 'tool.get_html', '--params', '{}']).catch((e) => errorOf(e));
  assert.doesNotMatch(JSON.stringify(shown), /Bravo content/, 'nothing of the blocked page is readable');
  await waitFor(async () => {
    const audit = await api(daemon.url, daemon.token, 'GET', '/v1/admin/audit?limit=50');
    return audit.body.events.some(
      (e) => e.action === 'policy.deny' && e.target === `session:${session.id}` && /browser stopped tab \d+ at localhost \(site_blocked pattern:localhost\)/.test(e.detail),
    );
  }, 10_000, 'the stop in the audit trail');

  await assert.rejects(latchkey(env, ['tab', 'create', `http://localhost:${port}/a`]), (e) => {
    const error = errorOf(e);
    return error.code === 'permission_denied' && error.data.reason === 'site_blocked' && error.data.pattern === 'localhost';
  });
  assert.equal((await latchkey(env, ['tab', 'list', '--scope', 'agent'])).tabs.length, 1, 'no tab was created');

  // A tab of the person's on a blocked site is not lent to the session.
  // Opened beside the popup, in the person's own window (a new page would open in
  // the focused Agent Window).
  const ownTab = await browser.worker.evaluate(async (url) => {
    const [popupTab] = await chrome.tabs.query({ url: `chrome-extension://${chrome.runtime.id}/popup.html` });
    return (await chrome.tabs.create({ windowId: popupTab.windowId, url, active: false })).id;
  }, `http://localhost:${port}/c`);
  const userTab = await waitFor(async () => {
    const tabs = (await latchkey(env, ['tab', 'list', '--scope', 'user'])).tabs;
    return tabs.find((t) => t.tab_id === ownTab && t.url?.startsWith(`http://localhost:${port}/`));
  }, 10_000, "the person's tab");
  await assert.rejects(latchkey(env, ['tab', 'borrow', String(userTab.tab_id)]), (e) => {
    const error = errorOf(e);
    return error.code === 'permission_denied' && error.data.reason === 'site_blocked' && error.data.host === 'localhost';
  });
  await browser.worker.evaluate((id) => chrome.tabs.remove(id), ownTab);
  await latchkey(agentEnv, ['session', 'stop', session.id]);
  assert.equal((await policy({})).status, 200);
});
