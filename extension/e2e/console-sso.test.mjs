// Single sign-on to the web console in real headless Chromium, against the real
// latchkeyd and a real OpenID provider (oidc-provider, certified, on
// 127.0.0.1:0; e2e/oidc-issuer.mjs): authorization code with PKCE, first sign-in
// making a member (an admin for an address the config lists), refusals for
// another domain and an unverified address, a role change from the Members page,
// and a removed member's cookie ending at once (docs/console.md, "Single sign-on").

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { accessibilityProblems, api, startStack, tempDir, waitFor } from './harness.mjs';
import { startIssuer } from './oidc-issuer.mjs';

let issuer;
// A second provider that puts the address in the ID token itself (the first
// gives it at its UserInfo endpoint only, as the specification prefers).
let direct;
let stack;
let page;
let shots;

const ACCOUNTS = {
  'boss@acme.example': { email: 'boss@acme.example', email_verified: true, name: 'Bo Boss' },
  'ann@acme.example': { email: 'ann@acme.example', email_verified: true, name: 'Ann Lee' },
  'eve@evil.example': { email: 'eve@evil.example', email_verified: true, name: 'Eve' },
  'una@acme.example': { email: 'una@acme.example', email_verified: false, name: 'Una' },
};

before(async () => {
  issuer = await startIssuer();
  direct = await startIssuer({ conformIdTokenClaims: false });
  const secret = randomBytes(24).toString('hex');
  const config = `
[[console.sso]]
id = "acme"
label = "Acme ID"
issuer = "${issuer.issuer}"
client_id = "latchkey-console"
client_secret = "${secret}"
team = "default"
allowed_domains = ["acme.example"]
first_login = "member"
admins = ["boss@acme.example"]

[[console.sso]]
id = "direct"
label = "Direct ID"
issuer = "${direct.issuer}"
client_id = "latchkey-direct"
client_secret_file = "SECRET_FILE"
team = "default"
allowed_domains = ["acme.example"]
`;
  const secretDir = await tempDir('latchkey-e2e-sso-secret-');
  const secretFile = join(secretDir, 'client-secret');
  await writeFile(secretFile, `${secret}\n`);
  stack = await startStack('latchkey-e2e-sso-', config.replace('SECRET_FILE', secretFile));
  issuer.register({
    clientId: 'latchkey-console',
    clientSecret: secret,
    redirectUri: `${stack.daemon.url}/console/sign-in/sso/acme/callback`,
    accounts: ACCOUNTS,
  });
  direct.register({
    clientId: 'latchkey-direct',
    clientSecret: secret,
    redirectUri: `${stack.daemon.url}/console/sign-in/sso/direct/callback`,
    accounts: ACCOUNTS,
  });
  page = await stack.browser.context.newPage();
  await page.setViewportSize({ width: 1100, height: 900 });
  shots = process.env.LATCHKEY_SCREENSHOTS ?? (await tempDir('latchkey-shots-'));
});

after(async () => {
  await stack?.close();
  await issuer?.close();
  await direct?.close();
});

/**
 * Sign in as `login` through the provider's own login page, as a person who has
 * no cookie at the provider or at latchkeyd yet; resolves where latchkeyd sends
 * the browser back.
 */
async function signInAs(login, through = issuer, label = 'Acme ID') {
  await page.context().clearCookies();
  await page.goto(`${stack.daemon.url}/console/sign-in`);
  await page.getByRole('link', { name: `Sign in with ${label}` }).click();
  await page.waitForURL(`${through.issuer}/**`);
  await page.fill('input[name=login]', login);
  await page.fill('input[name=password]', 'any password');
  await page.click('button[type=submit]');
  // The provider asks once for consent to share the address and name.
  const consent = page.getByRole('button', { name: 'Continue' });
  const back = () => page.url().startsWith(`${stack.daemon.url}/console`);
  await waitFor(async () => back() || (await consent.isVisible()), 15_000, 'consent or the console');
  if (!back()) await consent.click();
  await page.waitForURL(`${stack.daemon.url}/console/**`);
}

async function whoIsSignedIn() {
  return (await page.locator('header').textContent())?.replace(/\s+/g, ' ') ?? '';
}

async function members() {
  const r = await api(stack.daemon.url, stack.daemon.token, 'GET', '/v1/admin/members');
  assert.equal(r.status, 200);
  return r.body.members;
}

test('a listed address signs in as an admin, another as a member, and the admin changes the role', async () => {
  await page.goto(`${stack.daemon.url}/console/sign-in`);
  await page.screenshot({ path: join(shots, 'console-sign-in-sso.png') });
  assert.deepEqual(await accessibilityProblems(page), [], 'sign-in page with single sign-on');

  await signInAs('boss@acme.example');
  assert.match(new URL(page.url()).pathname, /^\/console\/devices$/);
  assert.match(await whoIsSignedIn(), /Bo Boss admin/);
  // The same person through the other provider (secret from a file, address
  // in the ID token) is the same member.
  await signInAs('boss@acme.example', direct, 'Direct ID');
  assert.match(new URL(page.url()).pathname, /^\/console\/devices$/);
  assert.match(await whoIsSignedIn(), /Bo Boss admin/);
  assert.equal((await members()).filter((m) => m.email === 'boss@acme.example').length, 1);

  await signInAs('ann@acme.example');
  assert.match(new URL(page.url()).pathname, /^\/console\/devices$/);
  assert.match(await whoIsSignedIn(), /Ann Lee member/);
  assert.equal(await page.getByRole('link', { name: 'Members' }).count(), 0, 'no Members page for a member');
  const ann = (await members()).find((m) => m.email === 'ann@acme.example');
  assert.equal(ann?.role, 'member');
  assert.equal(ann?.display_name, 'Ann Lee');

  // The admin makes Ann an admin from the Members page.
  await signInAs('boss@acme.example');
  await page.getByRole('link', { name: 'Members' }).click();
  await page.waitForURL('**/console/members');
  assert.deepEqual(await accessibilityProblems(page), [], 'members page with role forms');
  await page.getByLabel('Role of Ann Lee').selectOption('admin');
  await page.getByRole('button', { name: 'Change role of Ann Lee' }).click();
  await page.waitForURL('**/console/members');
  assert.equal((await members()).find((m) => m.id === ann.id)?.role, 'admin');

  const audit = await api(stack.daemon.url, stack.daemon.token, 'GET', '/v1/admin/audit?limit=50');
  const rows = audit.body.events.map((e) => `${e.action} ${e.actor} ${e.detail ?? ''}`);
  assert.ok(rows.some((r) => r.startsWith('member.add sso:acme first sign-in, role admin')), rows.join('\n'));
  assert.ok(rows.some((r) => r.startsWith('member.role member:') && r.endsWith('member to admin')), rows.join('\n'));
});

test('another domain and an unverified address are refused and sign no one in', async () => {
  for (const [login, says] of [
    ['eve@evil.example', /eve@evil\.example is not in a domain that signs in to this team here/],
    ['una@acme.example', /has not verified una@acme\.example/],
  ]) {
    await signInAs(login);
    assert.match(new URL(page.url()).pathname, /^\/console\/sign-in\/sso\/acme\/callback$/);
    assert.match((await page.locator('.problem').textContent()) ?? '', says);
    const cookies = await page.context().cookies();
    assert.ok(!cookies.some((c) => c.name === 'latchkey_console'), `${login}: not signed in`);
    assert.ok(!cookies.some((c) => c.name === 'latchkey_sso'), `${login}: the flow cookie is gone`);
  }
  assert.ok(!(await members()).some((m) => m.email.endsWith('evil.example') || m.email.startsWith('una@')));
});

test("a removed member's sign-in stops working at once", async () => {
  await signInAs('ann@acme.example');
  assert.match(await whoIsSignedIn(), /Ann Lee admin/);
  const ann = (await members()).find((m) => m.email === 'ann@acme.example');
  const removed = await api(stack.daemon.url, stack.daemon.token, 'DELETE', `/v1/admin/members/${ann.id}`);
  assert.equal(removed.status, 200);
  await page.reload();
  assert.match(new URL(page.url()).pathname, /^\/console\/sign-in$/);
});

test("a member sees only their own browsers, and a form posted from another origin changes nothing", async () => {
  // Bo's browser: our extension, paired from a link made for him.
  const boss = (await members()).find((m) => m.email === 'boss@acme.example');
  const link = await api(stack.daemon.url, stack.daemon.token, 'POST', '/v1/admin/pairings', {
    label: "Bo's laptop",
    member_id: boss.id,
  });
  assert.equal(link.status, 201);
  await stack.popup.fill('#link', link.body.link);
  await stack.popup.click('#pair');
  await waitFor(async () => (await stack.popup.locator('#status').getAttribute('aria-label')) === 'Connected', 15_000, 'Connected');
  const device = (await stack.popup.locator('#device').textContent())?.trim();

  await signInAs('ann@acme.example');
  assert.match(await whoIsSignedIn(), /Ann Lee member/);
  assert.match((await page.locator('.empty').textContent()) ?? '', /No browsers yet/);
  assert.ok(!(await page.content()).includes("Bo's laptop"), "not another member's browser");
  const foreign = await page.goto(`${stack.daemon.url}/console/devices/${device}/revoke`);
  assert.equal(foreign.status(), 404, 'another member’s browser answers like an unknown one');
  await page.goto(`${stack.daemon.url}/console/activity`);
  assert.ok(!(await page.content()).includes(device), 'nor its activity');

  // Bo, signed in, opens a page of another origin that posts the revoke form
  // to the console: his cookie goes with it, the CSRF token cannot.
  await signInAs('boss@acme.example');
  await page.goto(`${stack.site.base}/a`);
  const answered = page.waitForResponse((r) => r.url().endsWith(`/console/devices/${device}/revoke`));
  await page.evaluate(
    ([action]) => {
      const form = document.createElement('form');
      form.method = 'post';
      form.action = action;
      const csrf = Object.assign(document.createElement('input'), { name: 'csrf', value: 'guessed' });
      form.append(csrf);
      document.body.append(form);
      form.submit();
    },
    [`${stack.daemon.url}/console/devices/${device}/revoke`],
  );
  const refused = await answered;
  assert.equal(refused.status(), 403);
  assert.match(await refused.text(), /came from another site/);
  const still = await api(stack.daemon.url, stack.daemon.token, 'GET', `/v1/admin/devices/${device}`);
  assert.equal(still.body.status, 'active', JSON.stringify(still.body));

  // His own activity: his browser paired and connected.
  await page.goto(`${stack.daemon.url}/console/activity`);
  const text = (await page.locator('main').textContent()) ?? '';
  assert.match(text, new RegExp(`device\\.pair\\s*device:${device}`));
  assert.match(text, new RegExp(`device\\.connect\\s*device:${device}`));
  await page.screenshot({ path: join(shots, 'console-activity.png') });
  assert.deepEqual(await accessibilityProblems(page), [], 'activity page');

  // His browser's policy, from its row on Devices.
  await page.goto(`${stack.daemon.url}/console/devices`);
  await page.getByRole('link', { name: "Policy of Bo's laptop" }).click();
  await page.waitForURL(`**/console/devices/${device}/policy`);
  await page.getByLabel('Before a session starts').selectOption('ask');
  await page.getByLabel('Sites a session may open').fill('example.com\n*.example.org');
  await page.getByLabel('Longest session, in minutes').fill('45');
  await page.screenshot({ path: join(shots, 'console-policy.png'), fullPage: true });
  assert.deepEqual(await accessibilityProblems(page), [], 'policy page');
  await page.getByRole('button', { name: 'Save the policy' }).click();
  await page.waitForURL(`**/console/devices/${device}/policy?saved=0`);
  assert.match((await page.locator('.notice').textContent()) ?? '', /Saved/);
  const policy = await api(stack.daemon.url, stack.daemon.token, 'GET', `/v1/admin/devices/${device}/policy`);
  assert.deepEqual(policy.body.policy, { consent: 'ask', allow_sites: ['example.com', '*.example.org'], max_session_minutes: 45 });

  // The team's settings.
  await page.getByRole('link', { name: 'Team', exact: true }).click();
  await page.waitForURL('**/console/team');
  // An admin's top bar, every link in it, fits on one line at 1100 px.
  const [brand, who] = [await page.locator('.brand').boundingBox(), await page.locator('.who').boundingBox()];
  assert.ok(Math.abs(brand.y + brand.height / 2 - (who.y + who.height / 2)) < 8, `one line: ${JSON.stringify([brand, who])}`);
  await page.screenshot({ path: join(shots, 'console-team.png'), fullPage: true });
  assert.deepEqual(await accessibilityProblems(page), [], 'team settings');

  // Webhooks: an endpoint added, its secret shown once.
  await page.getByRole('link', { name: 'Webhooks', exact: true }).click();
  await page.waitForURL('**/console/webhooks');
  await page.getByLabel('URL').fill('https://hooks.example.com/latchkey');
  await page.getByLabel('Description').fill('Ops chat');
  await page.getByLabel('device.revoke', { exact: true }).check();
  await page.getByLabel('session.help_requested', { exact: true }).check();
  await page.getByRole('button', { name: 'Add', exact: true }).click();
  assert.match(await page.locator('#new-secret').inputValue(), /^whsec_/);
  await page.screenshot({ path: join(shots, 'console-webhooks.png'), fullPage: true });
  assert.deepEqual(await accessibilityProblems(page), [], 'webhooks page');
  const hooks = await api(stack.daemon.url, stack.daemon.token, 'GET', '/v1/admin/webhooks');
  assert.deepEqual(hooks.body.webhooks.map((w) => w.events), [['device.revoke', 'session.help_requested']]);
});
