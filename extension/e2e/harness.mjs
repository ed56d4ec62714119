// End-to-end harness: the real latchkeyd (built by cargo), a small local test site,
// and Debian's Chromium with the built extension, driven by playwright-core.

import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const ROOT = resolve(import.meta.dirname, '..', '..');
// `LATCHKEY_BIN_DIR` points elsewhere (the snapshot benchmark runs a release build).
const BIN = process.env.LATCHKEY_BIN_DIR ?? join(ROOT, 'target', 'debug');
export const EXTENSION_DIR = resolve(import.meta.dirname, '..', '.output', 'chrome-mv3');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Poll `cond` until it returns a truthy value or `ms` pass. */
export async function waitFor(cond, ms = 15_000, what = 'condition') {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try {
      last = await cond();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}

/** `latchkeyd serve` on `listen`; resolves with its address and first-start token. */
export async function startLatchkeyd(dataDir, listen = '127.0.0.1:0', configFile) {
  const args = ['serve', '--listen', listen, '--metrics-listen', '127.0.0.1:0', '--data-dir', dataDir, ...(configFile ? ['--config', configFile] : [])];
  const child = spawn(join(BIN, 'latchkeyd'), args, {
    env: { ...process.env, LATCHKEY_LOG: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  let token;
  for await (const line of lines) {
    const t = line.trim();
    if (t.startsWith('lk_')) token = t;
    const m = /^latchkeyd listening on (\S+)/.exec(t);
    if (m) return { child, addr: m[1], token, url: `http://${m[1]}` };
  }
  throw new Error('latchkeyd exited before listening');
}

export async function stopProcess(child) {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}

/** A JSON request with a bearer token; returns {status, body}. */
export async function api(base, token, method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** Run the `latchkey` CLI; resolves with parsed JSON stdout. */
export async function latchkey(env, args) {
  let out;
  try {
    out = await promisify(execFile)(join(BIN, 'latchkey'), ['--json', ...args], {
      env: { PATH: process.env.PATH, ...env },
    });
  } catch (e) {
    // Keep the CLI's JSON error document on the error for assertions and messages.
    e.message = `latchkey ${args.join(' ')}: ${e.stdout ?? ''}`;
    throw e;
  }
  // The CLI reads every answer against the tool catalogue's result types: what
  // the real extension answers must be what protocol/schema/tools.json says.
  assert.doesNotMatch(out.stderr, /does not match the tool catalogue/, `latchkey ${args.join(' ')}`);
  return JSON.parse(out.stdout);
}

import { startSite } from './site.mjs';

export { startSite };

/** Chromium with the extension loaded; resolves with the context and extension id. */
export async function launchBrowser({ windowSize } = {}) {
  const userDataDir = await mkdtemp(join(tmpdir(), 'latchkey-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: false,
    viewport: null,
    args: [
      '--headless=new',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      // Past the window's own size, headless screenshots of an emulated viewport
      // repeat the top of the page: a test that shoots tall pages asks for more.
      ...(windowSize ? [`--window-size=${windowSize}`] : []),
      `--disable-extensions-except=${EXTENSION_DIR}`,
      `--load-extension=${EXTENSION_DIR}`,
    ],
  });
  let [worker] = context.serviceWorkers();
  if (!worker) worker = await context.waitForEvent('serviceworker', { timeout: 30_000 });
  const extensionId = new URL(worker.url()).host;
  return {
    context,
    extensionId,
    worker,
    async close() {
      await context.close();
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}

export async function tempDir(prefix) {
  return mkdtemp(join(tmpdir(), prefix));
}

/**
 * Pair the browser through its popup with a fresh pairing link; resolves with the
 * device id once the popup shows Connected.
 */
export async function pairThroughPopup(daemon, popup, label = 'E2E browser') {
  const pairing = await api(daemon.url, daemon.token, 'POST', '/v1/admin/pairings', { label });
  if (pairing.status !== 201) throw new Error(`pairing: ${pairing.status}`);
  await popup.fill('#link', pairing.body.link);
  await popup.click('#pair');
  await waitFor(async () => (await popup.locator('#status').getAttribute('aria-label')) === 'Connected', 15_000, 'Connected');
  return (await popup.locator('#device').textContent())?.trim();
}

/**
 * Everything a test file drives: latchkeyd on 127.0.0.1:0 (with an optional TOML
 * config), the test site, Chromium with the extension and its popup open, and an
 * agent token. `close()` stops what was started (the current `stack.daemon`, which
 * a test may restart).
 */
export async function startStack(prefix, config, browserOptions) {
  const stack = { dataDir: await tempDir(prefix) };
  stack.close = async () => {
    await stack.browser?.close();
    stack.site?.server.close();
    if (stack.daemon) await stopProcess(stack.daemon.child);
    await rm(stack.dataDir, { recursive: true, force: true });
  };
  try {
    if (config) {
      stack.configFile = join(stack.dataDir, 'latchkey.toml');
      await writeFile(stack.configFile, config);
    }
    stack.daemon = await startLatchkeyd(stack.dataDir, '127.0.0.1:0', stack.configFile);
    stack.site = await startSite();
    stack.browser = await launchBrowser(browserOptions);
    stack.popup = await stack.browser.context.newPage();
    await stack.popup.goto(`chrome-extension://${stack.browser.extensionId}/popup.html`);
    const agent = await api(stack.daemon.url, stack.daemon.token, 'POST', '/v1/admin/tokens', { name: 'e2e-agent', role: 'agent' });
    if (agent.status !== 201) throw new Error(`agent token: HTTP ${agent.status}`);
    stack.agentEnv = { LATCHKEY_URL: stack.daemon.url, LATCHKEY_TOKEN: agent.body.token };
    return stack;
  } catch (e) {
    await stack.close();
    throw e;
  }
}

let axeSource;

/**
 * axe-core's serious and critical violations on `page` (WCAG 2.x A and AA rules),
 * each as `id: target`. Injected through the DevTools protocol, so extension
 * pages' CSP does not stop it.
 */
export async function accessibilityProblems(page) {
  axeSource ??= await readFile(join(import.meta.dirname, '..', 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
  await page.evaluate(axeSource);
  const found = await page.evaluate(() =>
    globalThis.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] }, resultTypes: ['violations'] }),
  );
  return found.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .flatMap((v) => v.nodes.map((n) => `${v.id}: ${n.target.join(' ')}`));
}
