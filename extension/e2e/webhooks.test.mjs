// Signed webhooks checked by an independent implementation (docs/webhooks.md):
// the real latchkeyd delivers the team's events to a receiver here, and the
// `standardwebhooks` package (the Standard Webhooks reference library) verifies
// each delivery's signature with the secret the gateway showed once. A delivery
// whose body was changed on the way, or signed with another secret, fails it.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { writeFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { api, startLatchkeyd, tempDir, waitFor } from './harness.mjs';

let dir;
let daemon;
let receiver;
const received = [];

before(async () => {
  dir = await tempDir('latchkey-e2e-webhooks-');
  const config = join(dir, 'latchkey.toml');
  await writeFile(config, '[webhooks]\nallow_private_destinations = true\npoll_interval_ms = 50\n');
  daemon = await startLatchkeyd(join(dir, 'data'), '127.0.0.1:0', config);
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
});

after(async () => {
  receiver?.close();
  daemon?.child.kill('SIGTERM');
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('every delivery verifies with the standardwebhooks library, and a tampered one does not', async () => {
  const url = `http://127.0.0.1:${receiver.address().port}/hook`;
  const created = await api(daemon.url, daemon.token, 'POST', '/v1/admin/webhooks', { url, events: ['token.create', 'token.revoke'] });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const secret = created.body.secret;
  assert.match(secret, /^whsec_/);

  const token = await api(daemon.url, daemon.token, 'POST', '/v1/admin/tokens', { name: 'hooked', role: 'agent' });
  assert.equal(token.status, 201);
  await api(daemon.url, daemon.token, 'DELETE', `/v1/admin/tokens/${token.body.id}`);
  await waitFor(async () => received.length === 2, 10_000, 'two deliveries');

  const wh = new Webhook(secret);
  const events = received.map(({ headers, body }) => wh.verify(body, headers));
  assert.deepEqual(events.map((e) => e.type), ['token.create', 'token.revoke']);
  assert.equal(events[0].data.target, `token:${token.body.id}`);
  assert.equal(events[0].data.team, 'default');
  assert.ok(events[0].data.seq < events[1].data.seq);

  const { headers, body } = received[0];
  assert.throws(() => wh.verify(body.replace('token.create', 'token.revoke'), headers));
  assert.throws(() => new Webhook('whsec_' + Buffer.alloc(24, 7).toString('base64')).verify(body, headers));
});
