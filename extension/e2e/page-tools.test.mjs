// Snapshots, refs and input in real headless Chromium against the real latchkeyd,
// driven by an agent through the `latchkey` CLI; the person's controls (the Stop
// button on the page, the kill switch and the activity list in the popup).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { api, latchkey, pairThroughPopup, startStack, waitFor } from './harness.mjs';

let stack;
let site;
let browser;
let popup;
let agentEnv;
let env;
let session;

/**
 * The ref of the first element matching `pattern`: the first ref after the match on
 * its line (a line can carry several elements inline).
 */
function refOf(text, pattern) {
  const found = pattern.exec(text);
  assert.ok(found, `nothing matches ${pattern} in:\n${text}`);
  const rest = text.slice(found.index + found[0].length).split('\n')[0];
  const m = /^(?:\s*\[[^\]]*\])*\s*@(e\d+)/.exec(rest);
  assert.ok(m, `no ref right after ${pattern}: ${found[0]}${rest}`);
  return m[1];
}

const snapshot = (extra = []) => latchkey(env, ['snapshot', ...extra]);
const call = (method, params) => latchkey(env, ['call', method, '--params', JSON.stringify(params)]);

/** The CLI's JSON error of a failed command. */
async function failure(promise) {
  try {
    await promise;
  } catch (e) {
    return JSON.parse(e.stdout).error;
  }
  assert.fail('the command succeeded');
}

before(async () => {
  stack = await startStack('latchkey-e2e-page-');
  ({ site, browser, popup, agentEnv } = stack);
  // Dialogs are the extension's to answer: without a listener Playwright would
  // dismiss them itself.
  browser.context.on('dialog', () => undefined);
  await pairThroughPopup(stack.daemon, popup);
  session = await latchkey(agentEnv, ['session', 'start', '--width', '1000', '--height', '800']);
  env = { ...agentEnv, LATCHKEY_SESSION: session.id };
});

after(async () => {
  await stack?.close();
});

test('log in through a form: snapshot, fill, click, wait, snapshot', async () => {
  await latchkey(env, ['navigate', `${site.base}/login`]);
  const form = await snapshot();
  assert.match(form.text, /- heading "Sign in" \[level=1\]/);
  const user = refOf(form.text, /textbox "Email"/);
  const password = refOf(form.text, /textbox "Password" \[secret\]/);
  const submit = refOf(form.text, /button "Sign in"/);
  const filled = await latchkey(env, ['fill', user, 'ann@example.com']);
  assert.equal(filled.used_ref, user);
  assert.equal(filled.value_length, 15);
  await latchkey(env, ['fill', `@${password}`, 'correct horse']);
  const before = await snapshot();
  assert.match(before.text, /textbox "Email" @e\d+: "ann@example.com"/);
  assert.ok(!before.text.includes('correct horse'), 'a password value is never in a snapshot');
  const clicked = await latchkey(env, ['click', refOf(before.text, /button "Sign in"/)]);
  assert.ok(clicked.x > 0 && clicked.y > 0, `click point ${clicked.x},${clicked.y}`);
  assert.ok(submit);
  await waitFor(async () => (await snapshot()).text.includes('Signed in as ann@example.com'), 10_000, 'the signed-in page');
});

test('choose from single and multiple selects; wrong targets and options fail cleanly', async () => {
  await latchkey(env, ['navigate', `${site.base}/controls`]);
  const s = await snapshot();
  const size = refOf(s.text, /combobox "Size"/);
  const toppings = refOf(s.text, /listbox "Toppings"/);
  const one = await latchkey(env, ['select', size, 'Large']);
  assert.deepEqual([one.multiple, one.selected_values, one.selected_labels], [false, ['l'], ['Large']]);
  const many = await latchkey(env, ['select', toppings, 'cheese', 'ham']);
  assert.deepEqual([many.multiple, many.selected_values], [true, ['cheese', 'ham']]);
  const after = await snapshot();
  assert.match(after.text, /size: l/);
  assert.match(after.text, /toppings: cheese,ham/);

  const ref = (p) => refOf(after.text, p);
  assert.deepEqual(await failure(latchkey(env, ['select', ref(/combobox "Size"/), 'XXL'])), {
    code: 'invalid_params',
    message: 'no option "XXL" in <select id="size">',
    data: { reason: 'option_not_found' },
  });
  assert.equal((await failure(latchkey(env, ['select', ref(/combobox "Size"/), 's', 'm']))).data.reason, 'single_select_value_count');
  assert.equal((await failure(latchkey(env, ['select', ref(/button "Save"/), 's']))).data.reason, 'target_not_select');
  assert.equal((await failure(latchkey(env, ['fill', ref(/button "Save"/), 'x']))).data.reason, 'target_not_fillable');
  const both = await failure(call('tool.click', { ref: 'e1', selector: '#save' }));
  assert.deepEqual([both.code, both.message], ['invalid_params', 'pass either ref or selector, not both']);
  assert.equal((await failure(call('tool.click', {}))).code, 'invalid_params');
  assert.equal((await failure(latchkey(env, ['press', 'Hyperspace']))).code, 'invalid_params');
  assert.equal((await failure(latchkey(env, ['click', '#no-such-thing']))).data.reason, 'selector_not_found');
});

test('press Enter and Ctrl+A as trusted keys', async () => {
  const s = await snapshot();
  const q = refOf(s.text, /textbox "Query"/);
  await latchkey(env, ['fill', q, 'hello world']);
  const chord = await latchkey(env, ['press', 'Ctrl+A', '--target', q]);
  assert.deepEqual([chord.key, chord.code, chord.modifiers], ['a', 'KeyA', ['ctrl']]);
  await waitFor(async () => (await snapshot()).text.includes('selected: 11'), 5_000, 'Ctrl+A selected the text');
  const enter = await latchkey(env, ['press', 'Enter']);
  assert.deepEqual(enter.modifiers, []);
  await waitFor(async () => (await snapshot()).text.includes('submitted: hello world'), 5_000, 'Enter submitted the form');
  // Typing into contenteditable, appending.
  const notes = refOf((await snapshot()).text, /textbox "Notes"/);
  await latchkey(env, ['fill', notes, 'first']);
  await call('tool.fill', { ref: notes, value: ' second', clear_before: false });
  assert.match((await snapshot()).text, /textbox "Notes" @e\d+: "first second"/);
});

test('hover reveals a menu', async () => {
  const s = await snapshot();
  assert.ok(!s.text.includes('Laptops'), 'the menu is hidden before hovering');
  const hovered = await latchkey(env, ['hover', refOf(s.text, /button "Products"/)]);
  assert.ok(hovered.x > 0);
  const open = await snapshot();
  assert.match(open.text, /link "Laptops" @e\d+ -> \/b/);
  // Pointing elsewhere closes it again.
  await latchkey(env, ['hover', refOf(open.text, /textbox "Query"/)]);
  assert.ok(!(await snapshot()).text.includes('Laptops'), 'the menu closes when the pointer leaves');
});

test('an alert is answered and reported in dialogs; a confirm is dismissed', async () => {
  const s = await snapshot();
  const r = await latchkey(env, ['click', refOf(s.text, /button "Save"/)]);
  assert.equal(r.dialogs?.length, 1, JSON.stringify(r));
  const [d] = r.dialogs;
  assert.deepEqual([d.type, d.message, d.handled, d.tab_id], ['alert', 'Saved!', 'accepted', r.tab_id]);
  assert.ok(d.sequence >= 1);

  // A dialog while a page loads is answered and reported by the navigation.
  const greeted = await latchkey(env, ['navigate', `${site.base}/greet`]);
  assert.equal(greeted.reached, 'load');
  assert.deepEqual(greeted.dialogs?.map((x) => [x.type, x.message, x.handled]), [['alert', 'Welcome!', 'accepted']]);

  await latchkey(env, ['navigate', `${site.base}/dialogs`]);
  const page = await snapshot();
  const ask = await latchkey(env, ['click', refOf(page.text, /button "Ask"/)]);
  assert.deepEqual(ask.dialogs.map((x) => [x.type, x.message, x.handled]), [['confirm', 'Delete everything?', 'dismissed']]);
  assert.ok(ask.dialogs[0].sequence > d.sequence || ask.tab_id !== d.tab_id);
  assert.match((await snapshot()).text, /answer: false/);
});

test('a page that opens dialogs forever gets a clear error and the session stays usable', async () => {
  const page = await snapshot();
  const err = await failure(latchkey(env, ['click', refOf(page.text, /button "Loop"/)]));
  assert.equal(err.code, 'cdp_failed');
  assert.match(err.message, /dialogs within .* unloaded/);
  // The answer comes once the tab shows the blank page, as the message says.
  const shown = await browser.worker.evaluate((id) => chrome.tabs.get(id).then((t) => [t.url, t.status]), page.tab_id);
  assert.deepEqual(shown, ['about:blank', 'complete']);
  assert.equal((await snapshot()).text, '- document (about:blank, empty)');
  await latchkey(env, ['navigate', `${site.base}/a`]);
  assert.match((await snapshot()).text, /link "to B"/);
});

test('an overlay over the target is a clear error, not a click elsewhere', async () => {
  await latchkey(env, ['navigate', `${site.base}/controls`]);
  const s = await snapshot();
  const err = await failure(latchkey(env, ['click', refOf(s.text, /button "Covered"/)]));
  assert.equal(err.code, 'permission_denied');
  assert.equal(err.data.reason, 'element_not_visible');
  assert.match(err.message, /covered by <div id="overlay">/);
  const title = await snapshot();
  assert.ok(!title.text.includes('clicked covered'));
  // An element that removes itself when the pointer reaches it.
  const gone = await failure(latchkey(env, ['click', refOf(title.text, /button "Vanish"/)]));
  assert.deepEqual([gone.code, gone.data.reason], ['not_found', 'ref_not_found']);
  assert.match(gone.message, /removed/);
  assert.match((await snapshot()).text, /button "Save"/);
});

test('a stale ref fails with ref_not_found after navigation and on another tab', async () => {
  const s = await snapshot();
  const save = refOf(s.text, /button "Save"/);
  await latchkey(env, ['navigate', `${site.base}/a`]);
  const stale = await failure(latchkey(env, ['click', save]));
  assert.deepEqual([stale.code, stale.data.reason], ['not_found', 'ref_not_found']);
  assert.match(stale.message, /navigated/);

  // A ref of one tab does not work on another.
  const fresh = await snapshot();
  const link = refOf(fresh.text, /link "to B"/);
  const first = fresh.tab_id;
  const other = await latchkey(env, ['tab', 'create', `${site.base}/c`]);
  await waitFor(async () => (await latchkey(env, ['wait-for-navigation'])).reached === 'load', 10_000, 'tab loaded');
  const wrongTab = await failure(call('tool.click', { ref: link, tab_id: other.tab_id }));
  assert.deepEqual([wrongTab.code, wrongTab.data.reason], ['not_found', 'ref_not_found']);
  // Unknown ref numbers fail the same way.
  assert.equal((await failure(call('tool.click', { ref: 'e9999', tab_id: first }))).data.reason, 'ref_not_found');
  await latchkey(env, ['tab', 'close', String(other.tab_id)]);
});

test('evaluate is refused until the person allows it in the popup', async () => {
  const refused = await failure(latchkey(env, ['evaluate', '1 + 2']));
  assert.equal(refused.code, 'permission_denied');
  assert.match(refused.message, /turned off/);
  await popup.check('#allow-evaluate');
  await waitFor(
    async () => (await browser.worker.evaluate(() => chrome.storage.local.get('latchkey.settings')))['latchkey.settings']?.allowEvaluate,
    5_000,
    'setting saved',
  );
  const three = await latchkey(env, ['evaluate', '1 + 2']);
  assert.deepEqual([three.ok, three.value], [true, 3]);
  assert.equal((await latchkey(env, ['evaluate', 'document.title'])).value, 'Page A');
  assert.equal((await latchkey(env, ['evaluate', '0 / 0'])).value, 'NaN');
  assert.equal((await latchkey(env, ['evaluate', 'undefined'])).value, null);
  assert.equal((await latchkey(env, ['evaluate', 'Promise.resolve(42)'])).value, 42);
  const thrown = await latchkey(env, ['evaluate', 'throw new Error("boom")']);
  assert.equal(thrown.ok, false);
  assert.match(thrown.error.text, /boom/);
  await popup.uncheck('#allow-evaluate');
  await waitFor(async () => (await failure(latchkey(env, ['evaluate', '1']))).code === 'permission_denied', 5_000, 'off again');
});

/** The colour of a PNG's pixel, decoded by the browser itself. */
const pixel = (b64, x, y) =>
  popup.evaluate(
    async ([data, px, py]) => {
      const img = new Image();
      img.src = `data:image/png;base64,${data}`;
      await img.decode();
      const canvas = new OffscreenCanvas(img.width, img.height);
      const g = canvas.getContext('2d');
      g.drawImage(img, 0, 0);
      return [...g.getImageData(px ?? img.width / 2, py ?? img.height / 2, 1, 1).data.slice(0, 3)];
    },
    [b64, x, y],
  );

test('get_html and screenshot of one element by ref; our page UI is not in screenshots', async () => {
  await latchkey(env, ['navigate', `${site.base}/checkout`]);
  const s = await snapshot();
  const html = await call('tool.get_html', { ref: refOf(s.text, /combobox "Country"/) });
  assert.match(html.html, /^<select id="country">/);
  assert.equal(html.byte_size, Buffer.byteLength(html.html));
  // Below the fold: scrolled into view and cropped to it, so its centre is its colour.
  const shot = await call('tool.screenshot', { ref: refOf(s.text, /button "Pay"/) });
  assert.deepEqual([shot.width, shot.height], [160, 48]);
  assert.deepEqual(await pixel(shot.image_base64), [51, 102, 204]);
  assert.equal((await failure(call('tool.screenshot', { ref: 'e9999' }))).data.reason, 'ref_not_found');
  // The Agent Window's red frame runs along every edge of the page, but not in a capture.
  const page = await call('tool.screenshot', {});
  const edge = [1, Math.floor(page.height / 3)];
  assert.deepEqual(await pixel(page.image_base64, ...edge), [255, 255, 255]);
  const seen = browser.context.pages().find((p) => p.url().endsWith('/checkout'));
  const control = (await seen.screenshot()).toString('base64');
  assert.deepEqual(await pixel(control, ...edge), [0xc5, 0x22, 0x1f], 'the frame is there when we do not hide it');
});

test('a snapshot of a 5,000-element page respects max_tokens and reports truncated', async () => {
  await latchkey(env, ['navigate', `${site.base}/big`]);
  const capped = await latchkey(env, ['snapshot', '--max-tokens', '2000']);
  assert.equal(capped.truncated, true);
  // A soft cap: the budget plus the one-line truncation mark.
  assert.ok(Math.ceil(capped.text.length / 4) <= 2000 + 30, `${capped.text.length} chars`);
  assert.ok(capped.ref_count > 100 && capped.ref_count < 5000, `ref_count ${capped.ref_count}`);
  const full = await snapshot();
  assert.equal(full.truncated, false);
  assert.equal(full.ref_count, 5000);
});

/**
 * Where the extension's own UI is, from the viewport's size at the moment: Chromium's
 * "started debugging this browser" bar takes about 40 px off the viewport's height
 * when the extension attaches to a new Agent Window's tab, which it does in the
 * background after the window opens, so the size the test first sees can be stale by
 * the time it clicks. The root is closed, so the tests click by layout, as a person
 * would:
 * - the bar is 6 px from the bottom-left corner with 4 px padding; Stop is 64 × 26 px,
 *   then Interrupt, 84 × 26 px, 8 px further;
 * - request_help's panel is 48 px from the top and 6 px from the right, 10 px padding;
 *   Done is 72 × 28 px, left of Cancel (8 px apart), in its top row.
 */
const OWN_UI = {
  stop: ({ height }) => [6 + 4 + 32, height - 6 - 4 - 13],
  interrupt: ({ height }) => [6 + 4 + 64 + 8 + 42, height - 6 - 4 - 13],
  helpDone: ({ width }) => [width - 6 - 10 - 72 - 8 - 36, 48 + 10 + 14],
};

/**
 * Click the extension's own UI once it is there: the banner's element is in the page
 * before its bar or help panel is laid out, and a click before that lands on the page.
 * Its shadow root is closed, so the point's element is the banner's host, and only
 * where the bar or panel takes the pointer. The point is worked out afresh at every
 * look; a timeout says what was there instead.
 */
async function clickOwnUi(page, which) {
  const at = OWN_UI[which];
  const point = await waitFor(
    async () => {
      const view = await page.evaluate(() => ({ width: innerWidth, height: innerHeight }));
      const [x, y] = at(view);
      const found = await page.evaluate(([px, py]) => document.elementFromPoint(px, py)?.localName ?? null, [x, y]);
      if (found === 'latchkey-agent-window') return [x, y];
      throw new Error(`at (${x}, ${y}) in ${view.width} × ${view.height}: ${found ?? 'nothing'}`);
    },
    10_000,
    `the extension's ${which} button`,
  );
  return page.mouse.click(...point);
}

test('Interrupt on the page refuses the next input; snapshots still work', async () => {
  await latchkey(env, ['navigate', `${site.base}/controls`]);
  const page = await waitFor(() => browser.context.pages().find((p) => p.url() === `${site.base}/controls`), 10_000, 'the page');
  await waitFor(() => page.locator('latchkey-agent-window').count(), 10_000, 'the Agent Window banner');
  await clickOwnUi(page, 'interrupt');
  const s = await snapshot();
  const aborted = await failure(latchkey(env, ['click', refOf(s.text, /button "Save"/)]));
  assert.equal(aborted.code, 'user_aborted');
  // Reads pass, and the refusal is once.
  const again = await snapshot();
  assert.match(again.text, /button "Save"/);
  const ok = await latchkey(env, ['click', refOf(again.text, /button "Save"/)]);
  assert.equal(ok.dialogs?.[0]?.message, 'Saved!');
  // The team's trail has the press, under the browser.
  await waitFor(async () => (await auditRows()).some((e) => e.action === 'session.interrupt' && e.target === `session:${session.id}` && e.actor.startsWith('device:')), 10_000, 'the interrupt audited');
});

test('Stop on the page ends the session: the window closes, the agent is told why, the trail says who', async (t) => {
  const other = await latchkey(agentEnv, ['session', 'start']);
  // Should this test fail before Stop, its session must not outlive it: later tests
  // count the agents on the icon.
  t.after(() => latchkey(agentEnv, ['session', 'stop', other.id]).catch(() => undefined));
  const otherEnv = { ...agentEnv, LATCHKEY_SESSION: other.id };
  // A page no other test leaves open, so the page found is this session's.
  await latchkey(otherEnv, ['navigate', `${site.base}/login`]);
  const page = await waitFor(
    async () => {
      for (const p of browser.context.pages()) {
        if (p.url() !== `${site.base}/login`) continue;
        const windowId = await browser.worker.evaluate((u) => chrome.tabs.query({ url: u }).then((t) => t.map((x) => x.windowId)), p.url());
        if (windowId.includes(other.agent_window_id)) return p;
      }
      return undefined;
    },
    10_000,
    'the page',
  );
  await waitFor(() => page.locator('latchkey-agent-window').count(), 10_000, 'the Agent Window banner');
  // Stop closes the window at once: the click's own acknowledgement may find the page gone.
  await clickOwnUi(page, 'stop').catch((e) => {
    if (!/closed/.test(String(e))) throw e;
  });
  const windows = () => browser.worker.evaluate(() => chrome.windows.getAll().then((w) => w.map((x) => x.id)));
  await waitFor(async () => !(await windows()).includes(other.agent_window_id), 10_000, 'the Agent Window closed');
  const told = await failure(latchkey(otherEnv, ['snapshot']));
  assert.deepEqual([told.code, told.data?.reason], ['session_ended', 'user_stopped']);
  await waitFor(
    async () => (await auditRows()).some((e) => e.action === 'session.end' && e.target === `session:${other.id}` && e.detail === 'user_stopped'),
    10_000,
    'the Stop audited',
  );
  // The other session carries on.
  assert.match((await snapshot()).text, /button "Save"|link|heading/);
});

/** The newest rows of the team's audit trail. */
const auditRows = async () => (await api(stack.daemon.url, stack.daemon.token, 'GET', '/v1/admin/audit?limit=100')).body.events;

/** The Agent Window page at `url`, as Playwright sees it. */
const agentPage = (url) => waitFor(() => browser.context.pages().find((p) => p.url() === url), 10_000, url);
const badge = () => browser.worker.evaluate(() => chrome.action.getBadgeText({}));

test('console and network logs are read with a cursor', async () => {
  await latchkey(env, ['navigate', `${site.base}/help`]);
  const logs = await waitFor(async () => {
    const r = await call('tool.console', {});
    return r.entries.length >= 2 ? r : undefined;
  }, 10_000, 'console entries');
  const hello = logs.entries.find((e) => e.text === 'hello from the page 42');
  assert.ok(hello, JSON.stringify(logs));
  assert.deepEqual([hello.kind, hello.level, hello.truncated], ['console', 'log', false]);
  assert.ok(logs.entries.some((e) => e.level === 'warning' && e.text === 'careful'));
  const later = await call('tool.console', { since: logs.next_since });
  assert.ok(later.entries.every((e) => e.sequence > logs.next_since));
  const first = await call('tool.console', { limit: 1 });
  assert.equal(first.entries.length, 1);
  assert.equal(first.truncated, true);
  const net = await waitFor(async () => {
    const r = await call('tool.network', {});
    return r.entries.find((e) => e.url?.endsWith('/missing')) ? r : undefined;
  }, 10_000, 'the 404 in the network log');
  const missing = net.entries.find((e) => e.url.endsWith('/missing'));
  assert.deepEqual([missing.kind, missing.method, missing.status], ['response', 'GET', 404]);
  assert.equal((await failure(call('tool.console', { since: -1 }))).code, 'invalid_params');
});

test('request_help: the person clicks Done on the page', async () => {
  const page = await agentPage(`${site.base}/help`);
  const asking = latchkey(env, ['request-help', '--reason', 'Please solve the puzzle', '--title', 'Puzzle']);
  asking.catch(() => undefined);
  await waitFor(async () => (await badge()) === 'help', 10_000, 'the badge');
  await waitFor(async () => !(await popup.locator('#help').isHidden()), 5_000, 'the request in the popup');
  assert.match((await popup.locator('#help-list').textContent()) ?? '', /Please solve the puzzle/);
  await clickOwnUi(page, 'helpDone');
  const r = await asking;
  assert.equal(r.outcome, 'continued');
  await waitFor(async () => (await badge()) === '1', 5_000, 'the icon counts the agent again');
});

test('request_help: the person declines in the popup', async () => {
  const asking = latchkey(env, ['request-help', '--reason', 'Approve the payment']);
  asking.catch(() => undefined);
  const item = popup.locator('#help-list li', { hasText: 'Approve the payment' });
  await waitFor(() => item.count(), 10_000, 'the request in the popup');
  await item.locator('.help-cancelled').click();
  assert.equal((await asking).outcome, 'cancelled');
});

test('request_help: completion criteria end the wait; a short wait times out', async () => {
  const page = await agentPage(`${site.base}/help`);
  const asking = call('tool.request_help', {
    prompt: 'Click "I am human"',
    targets: [{ selector: '#human' }, { selector: '#nothing-here' }],
    completion_criteria: { any: [{ text_exists: 'Verified' }], stable_for_ms: 300 },
  });
  asking.catch(() => undefined);
  await waitFor(async () => (await badge()) === 'help', 10_000, 'the request');
  // The person does it (a real click in the page).
  await page.click('#human');
  const done = await asking;
  assert.deepEqual([done.outcome, done.completed_by], ['completed', 'system']);
  assert.deepEqual(done.resolved_targets, [
    { matched: true, selector: '#human' },
    { matched: false, selector: '#nothing-here' },
  ]);
  const late = await call('tool.request_help', { prompt: 'Nobody is there', timeout_ms: 1000 });
  assert.equal(late.outcome, 'timed_out');
  const bad = await failure(call('tool.request_help', { prompt: 'x', completion_criteria: { any: [{ url_matches: '(' }] } }));
  assert.equal(bad.code, 'invalid_params');
  assert.equal((await failure(call('tool.request_help', {}))).code, 'invalid_params');
});

test('the audit trail says how each help request ended', async () => {
  const r = await api(stack.daemon.url, stack.daemon.token, 'GET', '/v1/admin/audit?action=session.call&limit=1000');
  assert.equal(r.status, 200);
  const help = r.body.events.map((e) => e.detail).filter((d) => d.startsWith('tool.request_help'));
  for (const outcome of ['continued', 'cancelled', 'completed', 'timed_out']) {
    assert.ok(help.some((d) => d.includes(` help:${outcome} `)), `${outcome}: ${help.join(' | ')}`);
  }
});

test('the activity list shows what agents did, without values, and can be cleared', async () => {
  await waitFor(async () => (await popup.locator('#activity li').count()) > 10, 5_000, 'activity listed');
  const text = (await popup.locator('#activity').textContent()) ?? '';
  assert.match(text, /click/);
  assert.match(text, /user_aborted|permission_denied/);
  for (const secret of ['correct horse', 'ann@example.com', 'hello world', '1 + 2']) assert.ok(!text.includes(secret), secret);
  const stored = await browser.worker.evaluate(() => chrome.storage.local.get('latchkey.activity'));
  assert.ok(!JSON.stringify(stored).includes('correct horse'));
  await popup.click('#clear-activity');
  await waitFor(async () => (await popup.locator('#activity li').count()) === 0, 5_000, 'cleared');
});

test('the kill switch ends every session, disconnects, and stays off until reconnected', async () => {
  const second = await latchkey(agentEnv, ['session', 'start']);
  // A call in flight when the person pulls the switch.
  const waiting = latchkey({ ...agentEnv, LATCHKEY_SESSION: second.id }, [
    'call', 'tool.wait_for_navigation', '--params', '{"wait_until":"networkidle","timeout_ms":60000}',
  ]);
  waiting.catch(() => undefined);
  await latchkey(env, ['navigate', `${site.base}/a`]);
  const windows = () => browser.worker.evaluate(() => chrome.windows.getAll().then((w) => w.map((x) => x.id)));
  assert.ok((await windows()).includes(second.agent_window_id));
  await popup.click('#stop-all');
  await waitFor(async () => (await popup.locator('#status').getAttribute('aria-label')) === 'Paused', 10_000, 'paused');
  const cut = await failure(waiting);
  assert.deepEqual([cut.code, cut.data?.reason], ['session_ended', 'kill_switch']);
  const gone = await failure(latchkey(env, ['snapshot']));
  assert.deepEqual([gone.code, gone.data?.reason], ['session_ended', 'kill_switch']);
  const windowsAfter = await windows();
  assert.ok(!windowsAfter.includes(second.agent_window_id) && !windowsAfter.includes(session.agent_window_id), 'Agent Windows closed');
  const list = await latchkey(agentEnv, ['browsers']);
  assert.equal(list.browsers[0].online, false);
  // Stays off: the keepalive alarm does not bring it back by itself.
  assert.equal((await browser.worker.evaluate(() => chrome.storage.local.get('latchkey.paused')))['latchkey.paused'], true);
  // The team's trail tells a kill switch from a dropped connection, and so do the sessions' ends.
  await waitFor(async () => {
    const rows = await auditRows();
    const ends = rows.filter((e) => e.action === 'session.end' && e.detail === 'kill_switch').map((e) => e.target);
    return (
      rows.some((e) => e.action === 'device.kill_switch' && /^Stop all agents pressed; sessions ended: [1-9]/.test(e.detail ?? '')) &&
      rows.some((e) => e.action === 'device.disconnect' && e.outcome === 'kill_switch') &&
      ends.includes(`session:${session.id}`) &&
      ends.includes(`session:${second.id}`)
    );
  }, 10_000, 'the kill switch audited');
  await popup.click('#connect');
  await waitFor(async () => (await popup.locator('#status').getAttribute('aria-label')) === 'Connected', 15_000, 'reconnected');
});
