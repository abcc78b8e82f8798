// What a flood costs (issue 17, hole 8). On the old server 400 bad /enroll calls wrote 400 log
// lines with no slow-down, and one node certificate opened 2,000 register streams in 15 s for
// about 2,004 store commits. Now failed bootstrap requests are throttled per client address and
// per token (429 with Retry-After), their logging is bounded with them, and a reconnect storm
// from one node costs a bounded number of writes.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { REGISTRATION_RATE } from '../../src/controlplane/sessions/agent-sessions.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
before(async () => { server = await startTestServer({ bootstrap: true }); });
after(() => server.close());

function post(path: string, body: unknown, localAddress = '127.0.0.1') {
  return new Promise<{ status: number; retryAfter?: string; body: any }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', localAddress, port: server.handle.bootstrapPort, path, method: 'POST', ca: readFileSync(join(server.pki.dir, 'ca.crt')), servername: 'localhost' }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode!, ...(res.headers['retry-after'] ? { retryAfter: String(res.headers['retry-after']) } : {}), body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

const refusedLogLines = (from: number) => server.logs.slice(from).filter((l) => l.includes('bootstrap request refused')).length;

test('400 bad enrollments from one address: 10 refused as bad, then 429 with Retry-After; at most a dozen log lines', async () => {
  const before = server.logs.length;
  const statuses: number[] = [];
  let retryAfter: string | undefined;
  for (let i = 0; i < 400; i++) {
    const r = await post('/enroll', { token: `guess-${i}`, nodeName: 'h', csr: 'x' }, '127.0.0.3');
    statuses.push(r.status);
    if (r.status === 429) retryAfter ??= r.retryAfter;
  }
  assert.deepEqual(statuses.slice(0, 10), Array(10).fill(403), 'the first failures are answered as themselves');
  assert.ok(statuses.slice(10).every((s) => s === 429), `then 429: ${[...new Set(statuses.slice(10))]}`);
  assert.ok(Number(retryAfter) >= 1, `Retry-After: ${retryAfter}`);
  const lines = refusedLogLines(before);
  assert.ok(lines >= 10 && lines <= 12, `${lines} refusal log lines for 400 requests`);
  // Another address is not punished for this one's guesses.
  assert.equal((await post('/enroll', { token: 'other', nodeName: 'h', csr: 'x' }, '127.0.0.4')).status, 403);
});

test('one token guessed from many addresses is throttled by the token itself', async () => {
  const statuses: number[] = [];
  for (let i = 0; i < 15; i++) statuses.push((await post('/enroll', { token: 'one-stolen-token', nodeName: 'h', csr: 'x' }, `127.0.1.${i + 1}`)).status);
  assert.deepEqual(statuses.slice(0, 10), Array(10).fill(403));
  assert.deepEqual(statuses.slice(10), Array(5).fill(429));
});

test('a reconnect storm from one node certificate costs a bounded number of store commits, and the node keeps one live stream', async () => {
  const tls = await server.pki.node('stormy', 'worker');
  const cache = server.handle.controlPlane.cache;
  const first = new SimulatedAgent({ address: server.address, tls, name: 'stormy' });
  await first.connect();
  first.close();
  const startRevision = cache.revision;
  const startedAt = Date.now();
  // Waves of 25 streams, each closed once answered, as a crash-looping agent would open them.
  const storm: SimulatedAgent[] = [];
  for (let wave = 0; wave < 12; wave++) {
    const agents = Array.from({ length: 25 }, () => new SimulatedAgent({ address: server.address, tls, name: 'stormy' }));
    await Promise.all(agents.map((a) => a.connect().catch(() => undefined)));
    storm.push(...agents);
    if (wave < 11) for (const a of agents) a.close();
  }
  const limited = storm.filter((a) => a.error?.code === Status.RESOURCE_EXHAUSTED);
  const admitted = storm.filter((a) => a.pool !== undefined);
  const elapsedMinutes = (Date.now() - startedAt) / 60_000;
  assert.ok(admitted.length <= REGISTRATION_RATE.burst + Math.ceil(elapsedMinutes * REGISTRATION_RATE.perMinute) + 1, `${admitted.length} of 300 admitted`);
  assert.equal(limited.length + admitted.length, 300, 'every stream answered: admitted or told to wait');
  assert.match(limited[0]!.error!.details, /node stormy registered too often .*; retry in \d+ s/);
  const commits = cache.revision - startRevision;
  // An admitted registration is a commit, its replaced stream's end another: bounded by the admitted, not the storm.
  assert.ok(commits <= 3 * admitted.length + 5, `${commits} commits for 300 registrations (${admitted.length} admitted)`);
  const live = storm.filter((a) => a.pool !== undefined && !a.ended);
  assert.ok(live.length <= 1, `${live.length} live streams for one node`);
  for (const a of storm) a.close();
});
