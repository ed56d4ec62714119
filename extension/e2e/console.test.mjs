// The web console in real headless Chromium against the real latchkeyd and our
// extension (docs/console.md): sign in with a token, see the paired browser
// online, revoke it from the console and see the extension's popup say so; sign
// out. axe-core on every page; screenshots into $LATCHKEY_SCREENSHOTS
// (docs/screenshots/ when blessed with `npm run screenshots`).

import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { accessibilityProblems, latchkey, startStack, tempDir, waitFor } from './harness.mjs';

let stack;
let page;
let shots;

/** The page as it is now: screenshot, and no serious or critical accessibility problem. */
async function check(name) {
  await page.screenshot({ path: join(shots, `${name}.png`) });
  assert.deepEqual(await accessibilityProblems(page), [], `${name}: serious or critical accessibility problems`);
}

before(async () => {
  stack = await startStack('latchkey-e2e-console-', undefined, { windowSize: '1400,1300' });
  page = await stack.browser.context.newPage();
  await page.setViewportSize({ width: 1100, height: 900 });
  shots = process.env.LATCHKEY_SCREENSHOTS ?? (await tempDir('latchkey-shots-'));
  await mkdir(shots, { recursive: true });
});

after(async () => {
  await stack?.close();
});

test('an admin signs in, pairs the browser from a console link, sees it online, revokes it, and the popup says so', async () => {
  const { daemon, popup } = stack;
  await page.goto(`${daemon.url}/console`);
  assert.match(new URL(page.url()).pathname, /^\/console\/sign-in$/);
  await check('console-sign-in');

  // A wrong token stays on the sign-in page and says why.
  await page.fill('#token', 'lk_wrong');
  await page.click('button[type=submit]');
  assert.match((await page.locator('.problem').textContent()) ?? '', /unknown, expired or revoked/);

  await page.fill('#token', daemon.token);
  await page.click('button[type=submit]');
  await page.waitForURL('**/console/devices');
  assert.match((await page.locator('.empty').textContent()) ?? '', /No browsers yet/);
  await check('console-devices-empty');

  // A link made in the console (in a second tab), pasted into the extension's
  // popup, pairs it; the Devices page, left open, shows it online without a reload.
  const pairPage = await stack.browser.context.newPage();
  await pairPage.setViewportSize({ width: 1100, height: 900 });
  await pairPage.goto(`${daemon.url}/console/devices`);
  await pairPage.locator('.empty').getByRole('link', { name: 'Pair a browser' }).click();
  await pairPage.waitForURL('**/console/pair');
  await pairPage.fill('#label', 'Kitchen laptop');
  await pairPage.getByRole('button', { name: 'Make a link' }).click();
  const link = await pairPage.locator('#pairing-link').inputValue();
  assert.match(link, /^ws:\/\/127\.0\.0\.1:\d+\/extension#/);
  assert.equal(await pairPage.locator('img.qr').count(), 1);
  // The script counts the expiry down in minutes and seconds.
  await waitFor(async () => /in \d+ min \d+ s/.test((await pairPage.locator('.card .countdown time').textContent()) ?? ''), 5_000, 'countdown');
  await pairPage.screenshot({ path: join(shots, 'console-pair.png') });
  assert.deepEqual(await accessibilityProblems(pairPage), [], 'console-pair: serious or critical accessibility problems');
  await pairPage.close();
  const loaded = await page.evaluate(() => performance.timeOrigin);
  await popup.fill('#link', link);
  await popup.click('#pair');
  await waitFor(async () => (await popup.locator('#status').getAttribute('aria-label')) === 'Connected', 15_000, 'Connected');
  const deviceId = (await popup.locator('#device').textContent())?.trim();
  assert.ok(deviceId);

  const row = page.locator(`tr[data-device="${deviceId}"]`);
  await waitFor(async () => /Online/.test((await row.textContent({ timeout: 500 }).catch(() => '')) ?? ''), 10_000, 'online without a reload');
  assert.equal(await page.evaluate(() => performance.timeOrigin), loaded, 'the page was not reloaded');
  const text = (await row.textContent()) ?? '';
  assert.match(text, /Kitchen laptop/);
  assert.match(text, /Online/);
  assert.match(text, /in 89 days|in 90 days/);
  assert.match((await row.locator('time').last().getAttribute('title')) ?? '', /^\d{4}-\d\d-\d\dT/);
  await check('console-devices');

  // An agent starts a session with the CLI: the Sessions page, left open, shows it
  // without a reload; End ends it, and the agent's next call hears why.
  await page.getByRole('link', { name: 'Sessions' }).click();
  await page.waitForURL('**/console/sessions');
  const sessionsLoaded = await page.evaluate(() => performance.timeOrigin);
  const session = await latchkey(stack.agentEnv, ['session', 'start', '--purpose', 'Compare prices']);
  const sessionRow = page.locator(`tr[data-session="${session.id}"]`);
  await waitFor(async () => (await sessionRow.count()) === 1, 10_000, 'the session listed without a reload');
  assert.equal(await page.evaluate(() => performance.timeOrigin), sessionsLoaded, 'the page was not reloaded');
  assert.match((await sessionRow.textContent()) ?? '', /e2e-agent[\s\S]*Kitchen laptop/);
  await check('console-sessions');
  await sessionRow.getByRole('button', { name: /End/ }).click();
  await page.waitForURL('**/console/sessions');
  assert.equal(await page.locator(`tr[data-session="${session.id}"]`).count(), 0);
  const ended = await latchkey({ ...stack.agentEnv, LATCHKEY_SESSION: session.id }, ['snapshot']).then(
    () => assert.fail('the session still answers'),
    (e) => JSON.parse(e.stdout).error,
  );
  assert.deepEqual([ended.code, ended.data?.reason], ['session_ended', 'stopped_by_admin']);
  await page.getByRole('link', { name: 'Devices' }).click();
  await page.waitForURL('**/console/devices');

  // Revoke every browser waits for the team's name: anything else changes nothing.
  await page.getByRole('link', { name: 'Revoke every browser…' }).click();
  await page.waitForURL('**/console/devices/revoke-all');
  assert.match((await page.locator('main').textContent()) ?? '', /1 active browser \(1 connected now/);
  await page.fill('#confirm-team', 'not the name');
  await page.getByRole('button', { name: 'Revoke every browser' }).click();
  await page.locator('#confirm-problem').waitFor();
  assert.match((await page.locator('#confirm-problem').textContent()) ?? '', /Nothing was revoked/);
  await check('console-revoke-all');
  await page.getByRole('link', { name: 'Cancel' }).click();
  await page.waitForURL('**/console/devices');
  assert.match((await row.textContent()) ?? '', /Online/);

  await row.getByRole('link', { name: /Revoke/ }).click();
  await page.waitForURL(`**/console/devices/${deviceId}/revoke`);
  assert.match((await page.locator('h1').textContent()) ?? '', /Revoke “Kitchen laptop”\?/);
  await check('console-revoke');
  await page.getByRole('button', { name: /Revoke Kitchen laptop/ }).click();
  await page.waitForURL('**/console/devices');
  assert.match((await page.locator(`tr[data-device="${deviceId}"]`).textContent()) ?? '', /Revoked/);
  await waitFor(
    async () => ((await popup.locator('#status').getAttribute('aria-label')) ?? '').includes('revoked'),
    10_000,
    'revoked in the popup',
  );

  // Renamed: the row says so.
  await row.getByRole('link', { name: /Rename/ }).click();
  await page.waitForURL(`**/console/devices/${deviceId}/rename`);
  await page.fill('#device-label', 'Old kitchen laptop');
  await page.getByRole('button', { name: 'Rename' }).click();
  await page.waitForURL('**/console/devices');
  assert.match((await row.textContent()) ?? '', /Old kitchen laptop/);

  // The tokens page: a new agent token is shown once, with a copy button.
  await page.getByRole('link', { name: 'Agents', exact: true }).click();
  await page.waitForURL('**/console/tokens');
  await page.fill('#token-name', 'booking-agent');
  await page.getByRole('button', { name: 'Create the token' }).click();
  assert.match(await page.locator('#new-token').inputValue(), /^lk_/);
  await check('console-tokens');
  await page.getByRole('link', { name: 'Members' }).click();
  await page.waitForURL('**/console/members');
  await page.fill('#member-name', 'Alice');
  await page.fill('#member-email', 'alice@example.com');
  await page.getByRole('button', { name: 'Add', exact: true }).click();
  await page.waitForURL('**/console/members');
  assert.match((await page.locator('tbody').textContent()) ?? '', /alice@example\.com/);
  await check('console-members');

  // The audit trail: what was just done, narrowed to a family, and exported.
  await page.getByRole('link', { name: 'Audit' }).click();
  await page.waitForURL('**/console/audit');
  const actions = async () => page.locator('tbody tr td.label').allTextContents();
  assert.ok((await actions()).includes('member.add'), `${await actions()}`);
  await page.fill('#f-action', 'device.*');
  await page.getByRole('button', { name: 'Show' }).click();
  await page.waitForURL('**/console/audit?action=device.*&**');
  const family = await actions();
  assert.ok(family.includes('device.revoke') && family.every((a) => a.startsWith('device.')), `${family}`);
  assert.equal(await page.inputValue('#f-action'), 'device.*');
  await check('console-audit');
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('link', { name: /^Export/ }).click(),
  ]);
  const exported = await readFile(await download.path(), 'utf8');
  assert.equal(JSON.parse(exported.split('\n')[0]).latchkey_audit_export, 1);
  assert.match(exported, /"device\.revoke"/);

  await page.getByRole('link', { name: 'Devices' }).click();
  await page.waitForURL('**/console/devices');


  // A narrow window still shows the table (it scrolls sideways), with no new problems.
  await page.setViewportSize({ width: 380, height: 700 });
  const sideways = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  assert.ok(sideways[0] <= sideways[1], `only the table scrolls sideways, not the page: ${sideways}`);
  await check('console-devices-narrow');
  await page.setViewportSize({ width: 1100, height: 900 });

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL('**/console/sign-in');
  await page.goto(`${daemon.url}/console/devices`);
  assert.match(new URL(page.url()).pathname, /^\/console\/sign-in$/);
});
