// The snapshot against Playwright's (docs/benchmarks.md, "Snapshots against
// Playwright's"): on three pages of real-world size, in the same headless
// Chromium, our extension's `tool.snapshot` (asked by an agent through a real
// latchkeyd, as agents ask it) against playwright-core's `ariaSnapshot()` of
// the page's body. Reports bytes, estimated tokens (bytes / 4), the median time
// to produce over alternating rounds, and whether every interactive element
// has a ref. Run with `npm run bench:snapshot` (it builds the extension first).

import http from 'node:http';
import { api, pairThroughPopup, startStack } from '../e2e/harness.mjs';
import { PAGES } from './pages.mjs';

const ROUNDS = Number(process.env.ROUNDS ?? 7);

/** Elements a person can act on, as the DOM has them (visible ones). */
const INTERACTIVE = 'a[href], button, input:not([type=hidden]), select, textarea, [role=button], [role=link], [role=checkbox], [role=tab], [contenteditable=true]';

/** Roles a person acts on; a native select's options are chosen through the select's own ref. */
const ACTIONABLE = 'button|link|textbox|searchbox|checkbox|radio|switch|slider|spinbutton|combobox|listbox|menuitem|menuitemcheckbox|menuitemradio|tab|treeitem';

/**
 * Elements of an actionable role printed without a ref. Quoted text is the page's,
 * so it is set aside; an element starts at its role word (a line's own, or one
 * inline after a colon, text or another element; never a link target after `->`)
 * and its ref, if it has one, comes before the next element.
 */
function withoutRef(text) {
  const role = new RegExp(`(?<!->) (?:${ACTIONABLE})(?=[ :]|$)`, 'g');
  let missing = 0;
  for (const line of text.split('\n')) {
    const bare = line.replace(/"(?:[^"\\]|\\.)*"/g, '""');
    const starts = [...bare.matchAll(role)].map((m) => m.index);
    starts.forEach((at, i) => {
      if (!/ @e\d+/.test(bare.slice(at, starts[i + 1] ?? bare.length))) missing += 1;
    });
  }
  return missing;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function serve() {
  const html = Object.fromEntries(Object.entries(PAGES).map(([k, f]) => [k, f()]));
  const server = http.createServer((req, res) => {
    const body = html[req.url.slice(1)];
    res.writeHead(body ? 200 : 404, { 'content-type': 'text/html; charset=utf-8' });
    res.end(body ?? 'not found');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, base: `http://127.0.0.1:${server.address().port}`, html };
}

async function main() {
  const stack = await startStack('latchkey-bench-snapshot-');
  const site = await serve();
  try {
    await pairThroughPopup(stack.daemon, stack.popup);
    const { LATCHKEY_URL: base, LATCHKEY_TOKEN: token } = stack.agentEnv;
    const started = await api(base, token, 'POST', '/v1/sessions', { width: 1280, height: 900 });
    if (started.status !== 201) throw new Error(`session: HTTP ${started.status}`);
    const session = started.body.id;
    const call = async (method, params) => {
      const r = await api(base, token, 'POST', `/v1/sessions/${session}/calls`, { method, params });
      if (r.status !== 200) throw new Error(`${method}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.result;
    };
    const page = await stack.browser.context.newPage();
    const rows = [];
    for (const name of Object.keys(PAGES)) {
      const url = `${site.base}/${name}`;
      await call('tool.navigate', { url });
      await page.goto(url);
      const interactive = await page.evaluate(
        (sel) => [...document.querySelectorAll(sel)].filter((e) => e.getClientRects().length > 0).length,
        INTERACTIVE,
      );
      const ours = [];
      const theirs = [];
      let oursText = '';
      let refCount = 0;
      let theirsText = '';
      for (let round = 0; round < ROUNDS; round++) {
        let t = performance.now();
        const snap = await call('tool.snapshot', {});
        ours.push(performance.now() - t);
        oursText = snap.text;
        refCount = snap.ref_count;
        t = performance.now();
        theirsText = await page.locator('body').ariaSnapshot();
        theirs.push(performance.now() - t);
      }
      const unaddressable = withoutRef(oursText);
      const bytes = (s) => Buffer.byteLength(s, 'utf8');
      rows.push({
        page: name,
        html_bytes: bytes(site.html[name]),
        interactive,
        ours: { bytes: bytes(oursText), tokens: Math.ceil(bytes(oursText) / 4), ms: median(ours), refs: refCount, unaddressable },
        playwright: { bytes: bytes(theirsText), tokens: Math.ceil(bytes(theirsText) / 4), ms: median(theirs) },
        size_ratio: bytes(oursText) / bytes(theirsText),
        time_ratio: median(ours) / median(theirs),
      });
    }
    await page.close();
    console.log(JSON.stringify({ scenario: 'snapshot', rounds: ROUNDS, rows }, null, 2));
    console.log('\n| page | HTML | interactive elements | ours: bytes (≈ tokens) | Playwright: bytes (≈ tokens) | size ratio | ours: median ms | Playwright: median ms | time ratio | refs | interactive lines without a ref |');
    console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const r of rows) {
      console.log(`| ${r.page} | ${r.html_bytes} B | ${r.interactive} | ${r.ours.bytes} (${r.ours.tokens}) | ${r.playwright.bytes} (${r.playwright.tokens}) | ${r.size_ratio.toFixed(2)}× | ${r.ours.ms.toFixed(1)} | ${r.playwright.ms.toFixed(1)} | ${r.time_ratio.toFixed(2)}× | ${r.ours.refs} | ${r.ours.unaddressable} |`);
    }
    // Every interactive element must be addressable: the run fails otherwise
    // (scripts/test runs it once as a check).
    const missing = rows.filter((r) => r.ours.unaddressable > 0 || r.ours.refs < r.interactive);
    if (missing.length > 0) {
      throw new Error(`interactive elements without a ref on: ${missing.map((r) => r.page).join(', ')}`);
    }
  } finally {
    site.server.close();
    await stack.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
