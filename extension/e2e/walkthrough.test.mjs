// README.md's first command and its five-minute walk-through, run as written: the
// `sh` blocks are read from README.md and typed, line by line, into one bash (so
// `alias` and `export` carry on as in a terminal), against latchkeyd started by the
// README's own command, with the person's steps done in real Chromium with the
// built extension. What is changed, and only this:
// - latchkeyd gets LATCHKEY_LISTEN and LATCHKEY_METRICS_LISTEN=127.0.0.1:0 (no fixed
//   port in a test) and a fresh HOME (its data directory is ~/.local/share/latchkey),
//   and the walk-through's 127.0.0.1:52800 becomes the address it printed;
// - https://example.com becomes a page of the local test site (no internet here);
// - the example device id 3f9a21bc becomes the one `latchkey admin devices` printed;
// - the agent's block runs in a scratch directory (its screenshot lands there).
// The release build the README asks for happens here: this is CI's one release build.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { launchBrowser, startSite, stopProcess, tempDir, waitFor } from './harness.mjs';

const ROOT = resolve(import.meta.dirname, '..', '..');
/** The release build and first start can take minutes on two cores. */
const BUILD_MS = 25 * 60_000;

let home;
let scratch;
let daemon;
let site;
let browser;
let popup;
let shell;

/** README.md's sh blocks: the first one (the two commands) and the walk-through's. */
async function readme() {
  const text = await readFile(join(ROOT, 'README.md'), 'utf8');
  const blocks = (part) => [...part.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
  const start = text.indexOf('## Five-minute walk-through');
  const end = text.indexOf('\n## ', start + 1);
  assert.ok(start > 0 && end > start, 'README.md has its walk-through');
  return { top: blocks(text.slice(0, start))[0], walk: blocks(text.slice(start, end)) };
}

/** A block's commands: continuation lines joined, comments and blank lines dropped. */
function commands(block) {
  const joined = block.replace(/\\\n\s*/g, '');
  return joined
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
}

/** The environment a person's terminal would have, with a fresh home. */
function terminalEnv(extra = {}) {
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    // The toolchain stays where it is installed.
    CARGO_HOME: process.env.CARGO_HOME ?? join(homedir(), '.cargo'),
    RUSTUP_HOME: process.env.RUSTUP_HOME ?? join(homedir(), '.rustup'),
    LANG: 'C.UTF-8',
    ...extra,
  };
  for (const k of ['CARGO_TARGET_DIR', 'CI']) if (process.env[k]) env[k] = process.env[k];
  return env;
}

/**
 * One bash, fed a line at a time like a terminal; `run` resolves with the line's
 * exit status and what it printed.
 */
function startShell(cwd, env) {
  const child = spawn('bash', ['--norc', '--noprofile'], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  child.stdin.write('shopt -s expand_aliases\nset -o pipefail\n');
  let n = 0;
  return {
    child,
    async run(line, ms = 120_000) {
      const mark = `__latchkey_walkthrough_${++n}__`;
      out = '';
      err = '';
      child.stdin.write(`${line}\nprintf '\\n${mark} %s\\n' "$?"; printf '\\n${mark}\\n' >&2\n`);
      const done = await waitFor(() => {
        const m = new RegExp(`\\n${mark} (\\d+)\\n`).exec(out);
        return m && err.includes(`\n${mark}\n`) ? m : null;
      }, ms, line);
      return {
        code: Number(done[1]),
        stdout: out.slice(0, done.index).trim(),
        stderr: err.slice(0, err.indexOf(`\n${mark}\n`)).trim(),
      };
    },
    async close() {
      child.stdin.end();
      if (child.exitCode === null) child.kill('SIGTERM');
    },
  };
}

/** Run `line` and require it to succeed. */
async function ok(line, ms) {
  const r = await shell.run(line, ms);
  assert.equal(r.code, 0, `${line}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  return r;
}

before(async () => {
  home = await tempDir('latchkey-walkthrough-home-');
  scratch = await tempDir('latchkey-walkthrough-');
  site = await startSite();
});

after(async () => {
  await shell?.close();
  await browser?.close();
  site?.server.close();
  if (daemon) await stopProcess(daemon);
  await rm(home, { recursive: true, force: true });
  await rm(scratch, { recursive: true, force: true });
});

test('README: the first command starts latchkeyd on its embedded default', { timeout: BUILD_MS }, async () => {
  const { top } = await readme();
  const [serve] = commands(top);
  assert.match(serve, /latchkeyd -- serve$/);
  daemon = spawn('bash', ['-c', serve], {
    cwd: ROOT,
    env: terminalEnv({ LATCHKEY_LISTEN: '127.0.0.1:0', LATCHKEY_METRICS_LISTEN: '127.0.0.1:0', LATCHKEY_LOG: 'warn' }),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let tokenFile;
  for await (const line of createInterface({ input: daemon.stdout })) {
    const file = /also in (\S+)\):/.exec(line);
    if (file) tokenFile = file[1];
    const m = /^latchkeyd listening on (\S+)/.exec(line.trim());
    if (m) {
      daemon.addr = m[1];
      break;
    }
  }
  assert.ok(daemon.addr, 'latchkeyd printed where it listens');
  // The data directory is the same from anywhere: in the home directory.
  assert.equal(tokenFile, join(home, '.local', 'share', 'latchkey', 'bootstrap-admin-token'));
});

test('README: the walk-through, as written', { timeout: BUILD_MS }, async () => {
  assert.ok(daemon?.addr, 'latchkeyd is running');
  const { walk } = await readme();
  assert.equal(walk.length, 4, 'login, the person and the admin, the agent, what the admin sees');
  const local = (line) => line.replaceAll('127.0.0.1:52800', daemon.addr).replaceAll('https://example.com', `${site.base}/a`);
  shell = startShell(ROOT, terminalEnv());

  // Log in: the CLI's release build, and the admin token from the data directory.
  for (const line of commands(walk[0])) await ok(local(line), BUILD_MS);

  // The person loads the extension; the admin adds them and pairs their browser.
  browser = await launchBrowser();
  popup = await browser.context.newPage();
  await popup.goto(`chrome-extension://${browser.extensionId}/popup.html`);
  let deviceId;
  for (const line of commands(walk[1])) {
    const r = await ok(local(line));
    const link = /(wss?:\/\/\S+\/extension#\S+)/.exec(r.stdout);
    if (/admin pair /.test(line)) {
      assert.ok(link, `a pairing link: ${r.stdout}`);
      await popup.fill('#link', link[1]);
      await popup.click('#pair');
      await waitFor(async () => (await popup.locator('#status').getAttribute('aria-label')) === 'Connected', 15_000, 'Connected');
    }
    if (/admin devices$/.test(line)) {
      const row = r.stdout.split('\n').find((l) => l.includes('Alice laptop'));
      assert.ok(row && /online/.test(row) && /Alice <alice@example.com>/.test(row), r.stdout);
      deviceId = row.split(/\s+/)[0];
    }
  }
  assert.match(deviceId ?? '', /^[0-9a-f]{8,}$/);

  // The agent's turn; Alice allows the session in her popup.
  await ok(`cd ${JSON.stringify(scratch)}`);
  for (const line of commands(walk[2])) {
    if (/session start/.test(line)) {
      const started = shell.run(local(line));
      await waitFor(async () => (await popup.locator('#consent-list li').count()) === 1, 30_000, 'the consent prompt');
      assert.match(await popup.locator('#consent-list li').first().textContent(), /my-agent/);
      await popup.click('#consent-list .consent-once');
      const r = await started;
      assert.equal(r.code, 0, `${line}: ${r.stderr}`);
      continue;
    }
    const r = await ok(local(line));
    if (/^latchkey browsers/.test(line)) assert.match(r.stdout, /Alice laptop\s+online/);
    if (/^latchkey snapshot/.test(line)) assert.match(r.stdout, /Alpha content/);
    if (/^latchkey session stop/.test(line)) assert.match(r.stdout, /stopped/);
  }
  assert.ok(existsSync(join(scratch, 'page.png')), 'the screenshot was saved');

  // What the admin sees afterwards, and the revocation.
  for (const line of commands(walk[3])) {
    const r = await ok(local(line.replaceAll('3f9a21bc', deviceId)));
    if (/admin sessions/.test(line)) assert.match(r.stdout, /no sessions/);
    if (/^latchkey admin audit(\s+#.*)?$/.test(line)) {
      for (const action of ['session.start', 'session.call', 'session.end', 'device.pair']) assert.match(r.stdout, new RegExp(action.replace('.', '\\.')));
    }
    if (/audit verify-file/.test(line)) assert.match(r.stdout, /chain intact; \d+ signed checkpoints?, the last covering rows up to \d+$/m);
    if (/admin revoke/.test(line)) assert.match(r.stdout, /revoked/);
  }
  await waitFor(async () => ((await popup.locator('#status').getAttribute('aria-label')) ?? '').includes('revoked'), 15_000, 'the popup says revoked');
});
