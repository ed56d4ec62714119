// The remote MCP endpoint in real headless Chromium with the extension paired: the
// runnable examples in examples/ (the official TypeScript SDK, which speaks MCP
// 2025-11-25, and the official Python SDK, which speaks 2026-07-28) each list
// browsers, open a local page, snapshot it, type and click by ref, and save a
// screenshot; the TypeScript SDK also reads the tool list and a tool error, and
// fills a checkout form in one browser_fill_form call.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, readFile, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { pairThroughPopup, startStack } from './harness.mjs';

const run = promisify(execFile);
const EXTENSION = resolve(import.meta.dirname, '..');
const EXAMPLES = resolve(EXTENSION, '..', 'examples');
const PYTHON = process.env.LATCHKEY_EXAMPLE_PYTHON ?? 'python3';

let stack;
let mcpUrl;
let token;

before(async () => {
  stack = await startStack('latchkey-e2e-mcp-');
  await pairThroughPopup(stack.daemon, stack.popup);
  mcpUrl = `${stack.daemon.url}/mcp`;
  token = stack.agentEnv.LATCHKEY_TOKEN;
});

after(async () => {
  await stack?.close();
});

/** Width and height from a PNG's IHDR chunk, after checking its signature. */
function pngSize(bytes) {
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

/** Run an example agent; its stdout is one JSON object. */
async function runExample(file, args) {
  const env = { ...process.env, LATCHKEY_MCP_URL: mcpUrl, LATCHKEY_TOKEN: token };
  const { stdout } = await run(file, args, { env, timeout: 120_000 });
  assert.ok(!stdout.includes(token), 'the token is never printed');
  return JSON.parse(stdout);
}

test('the TypeScript example signs in through MCP 2025-11-25', async () => {
  // Compiled where Node finds the extension's SDK and TypeScript: the example
  // type-checks as a user's `npm start` would check it.
  const dir = join(EXTENSION, '.output', 'example-ts');
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  for (const f of ['agent.ts', 'tsconfig.json']) await copyFile(join(EXAMPLES, 'typescript', f), join(dir, f));
  await run(process.execPath, [join(EXTENSION, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir]);
  const shot = join(stack.dataDir, 'ts.png');
  const done = await runExample(process.execPath, [
    join(dir, 'dist', 'agent.js'),
    `${stack.site.base}/login`,
    '--type', 'Email=ann@example.com',
    '--type', 'Password=correct horse',
    '--click', 'Sign in',
    '--screenshot', shot,
  ]);
  assert.equal(done.protocol, '2025-11-25');
  assert.equal(done.browsers.length, 1);
  assert.equal(done.browsers[0].online, true);
  assert.ok(done.refs >= 3, `refs: ${done.refs}`);
  assert.match(done.after, /Signed in as ann@example\.com/);
  assert.ok(!done.after.includes('correct horse'), 'a password is never in a snapshot');
  assert.equal(done.screenshot.mime_type, 'image/png');
  const { width, height } = pngSize(await readFile(shot));
  assert.ok(width > 100 && height > 100, `${width}×${height}`);
});

test('the Python example follows a link through MCP 2026-07-28', async () => {
  const shot = join(stack.dataDir, 'py.png');
  const done = await runExample(PYTHON, [
    join(EXAMPLES, 'python', 'latchkey_agent.py'),
    `${stack.site.base}/a`,
    '--click', 'to B',
    '--screenshot', shot,
  ]);
  assert.equal(done.protocol, '2026-07-28');
  assert.equal(done.browsers[0].online, true);
  assert.match(done.after, /Bravo content/);
  assert.equal(done.screenshot.mime_type, 'image/png');
  const { width, height } = pngSize(await readFile(shot));
  assert.ok(width > 100 && height > 100, `${width}×${height}`);
});

test('tools carry the catalogue’s schemas and hints, the skill is a resource, a stale ref is an actionable tool error', async () => {
  const client = new Client({ name: 'e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  }));
  try {
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    assert.equal(byName.get('browser_snapshot').annotations.readOnlyHint, true);
    assert.equal(byName.get('browser_click').annotations.destructiveHint, true);
    assert.deepEqual(byName.get('browser_navigate').inputSchema.required, ['url']);
    // The skill is served as a resource, read as committed.
    const { resources } = await client.listResources();
    assert.deepEqual(resources.map((r) => r.uri), ['skill://latchkey/SKILL.md']);
    const read = await client.readResource({ uri: 'skill://latchkey/SKILL.md' });
    assert.equal(read.contents[0].text, await readFile(join(EXTENSION, '..', 'skills', 'latchkey', 'SKILL.md'), 'utf8'));
    await client.callTool({ name: 'browser_navigate', arguments: { url: `${stack.site.base}/a` } });
    const stale = await client.callTool({ name: 'browser_click', arguments: { ref: 'e999' } });
    assert.equal(stale.isError, true);
    const said = stale.content.map((b) => b.text).join('\n');
    assert.match(said, /^not_found \(ref_not_found\)/);
    assert.match(said, /stale ref: call browser_snapshot again/);
    await client.callTool({ name: 'browser_close', arguments: {} });
  } finally {
    await client.close();
  }
});

test('browser_fill_form sets a text field, a select, a slider and a checkbox in one call; a bad field changes nothing', async () => {
  const client = new Client({ name: 'e2e-form', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  }));
  const said = (answer) => answer.content.map((b) => b.text).join('\n');
  const snapshot = async () => said(await client.callTool({ name: 'browser_snapshot', arguments: {} }));
  /** The form's fields with refs from `page`, a snapshot's text; `gift` is the checkbox's value. */
  const form = (page, gift) => {
    const ref = (pattern) => {
      const line = page.split('\n').find((l) => pattern.test(l));
      const m = line && /\[ref=(e\d+)\]/.exec(line);
      assert.ok(m, `${pattern} in:\n${page}`);
      return m[1];
    };
    return [
      { name: 'Full name', type: 'textbox', ref: ref(/textbox "Full name"/), value: 'Ann Lee' },
      { name: 'Country', type: 'combobox', ref: ref(/combobox "Country"/), value: 'France' },
      { name: 'Quantity', type: 'slider', ref: ref(/slider "Quantity"/), value: '3' },
      { name: 'Gift wrap', type: 'checkbox', ref: ref(/checkbox "Gift wrap"/), value: gift },
    ];
  };
  const fill = (fields) => client.callTool({ name: 'browser_fill_form', arguments: { fields } });
  try {
    await client.callTool({ name: 'browser_navigate', arguments: { url: `${stack.site.base}/checkout` } });
    const refused = await fill(form(await snapshot(), 'yes'));
    assert.equal(refused.isError, true);
    assert.match(said(refused), /^invalid_params: field "Gift wrap" is a checkbox: its value is "true" or "false"/);
    const untouched = await snapshot();
    assert.match(untouched, /name: ; country: ; quantity: 1; gift: no/, 'a refused form changes nothing');

    const filled = await fill(form(untouched, 'true'));
    assert.equal(filled.isError, false, said(filled));
    assert.match(said(filled), /^Set 4 of 4 fields:/);
    assert.match(said(filled), /"Country" \[ref=e\d+\]: selected \["France"\]/);
    assert.match(said(filled), /"Gift wrap" \[ref=e\d+\]: checked/);
    const once = await snapshot();
    assert.match(once, /name: Ann Lee; country: fr; quantity: 3; gift: yes/);
    // Asked again, a box already checked is left as it is, not toggled.
    assert.equal((await fill(form(once, 'true'))).isError, false);
    const twice = await snapshot();
    assert.match(twice, /gift: yes/);
    assert.equal((await fill(form(twice, 'false'))).isError, false);
    assert.match(await snapshot(), /gift: no/);
    await client.callTool({ name: 'browser_close', arguments: {} });
  } finally {
    await client.close();
  }
});
