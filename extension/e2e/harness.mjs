// End-to-end harness: the real latchkeyd (built by cargo), a small local test site,
// and Debian's Chromium with the built extension, driven by playwright-core.

import { spawn, execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const ROOT = resolve(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'target', 'debug');
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
  try {
    const { stdout } = await promisify(execFile)(join(BIN, 'latchkey'), ['--json', ...args], {
      env: { PATH: process.env.PATH, ...env },
    });
    return JSON.parse(stdout);
  } catch (e) {
    // Keep the CLI's JSON error document on the error for assertions and messages.
    e.message = `latchkey ${args.join(' ')}: ${e.stdout ?? ''}`;
    throw e;
  }
}

/** Pages for the agent to visit. */
export async function startSite() {
  const page = (title, body) =>
    `<!doctype html><html><head><title>${title}</title></head><body><h1>${title}</h1>${body}</body></html>`;
  const server = http.createServer((req, res) => {
    const routes = {
      '/a': page('Page A', '<p>Alpha content</p><a href="/b">to B</a>'),
      '/b': page('Page B', '<p>Bravo content</p>'),
      '/c': page('Page C', '<p>Charlie content</p>'),
    };
    const html = routes[req.url ?? ''];
    res.writeHead(html ? 200 : 404, { 'content-type': 'text/html; charset=utf-8' });
    res.end(html ?? 'not found');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  return { server, base: `http://127.0.0.1:${port}` };
}

/** Chromium with the extension loaded; resolves with the context and extension id. */
export async function launchBrowser() {
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
