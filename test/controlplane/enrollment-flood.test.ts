// The anonymous enrollment queue cannot be filled for long (issue 31, hole 6). From 100
// loopback addresses an anonymous client filled the 1,000-request queue in 23 s; a real host then
// got 503 with Retry-After 600 for up to 24 h, the store grew from 148 kB to 63 MB, and the
// operator's only remedy was to deny 1,000 requests one at a time. Now: each request is small; new
// requests are bounded per address, per network and in all; a request its host stops polling
// expires within minutes while one that polls keeps its place; a full queue says to come back
// within a minute; and `mcctl deny enrollment --all-pending [--from CIDR]` clears a flood.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { bootstrapFetch, requestEnrollment } from '../helpers/bootstrap-client.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const servers: TestServer[] = [];
after(() => Promise.all(servers.map((s) => s.close())));
async function server(bootstrap: Parameters<typeof startTestServer>[0] extends infer O ? O extends { bootstrap?: infer B } ? Exclude<B, boolean | undefined> : never : never, tokenSweepMs?: number): Promise<TestServer> {
  const s = await startTestServer({ bootstrap: { failureRate: { burst: 1000, perMinute: 1000 }, ...bootstrap }, ...(tokenSweepMs ? { tokenSweepMs } : {}) });
  servers.push(s);
  return s;
}
const cli = (s: TestServer, ...args: string[]) => runCliAsync(['--server', s.address, '--pki-dir', s.pki.dir, '--config', '/dev/null', ...args]);
const states = (s: TestServer) => [...s.handle.controlPlane.cache.enrollmentRequests.values()].map((o) => o.value);

test('a request is small: labels beyond 2,048 characters in all are refused, naming the limit, and a stored request is a few kB', async () => {
  const s = await server({});
  // 64 labels of long keys: 8 kB of what the host says about itself (the old server took 24 kB).
  const labels = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`example.com/${'k'.repeat(50)}${i}`, 'v'.repeat(60)]));
  const bloated = await requestEnrollment(s, 'bloated-1', 'worker', { labels });
  assert.equal(bloated.status, 400, JSON.stringify(bloated.body).slice(0, 300));
  assert.match(bloated.body.error, /labels: 64 labels of \d+ characters; a request may carry at most 64 labels of 2048 characters in all/);
  const csr = await bootstrapFetch(s, '/enrollment-requests', { method: 'POST', body: { nodeName: 'long-csr', pool: 'worker', csr: 'x'.repeat(5000) } });
  assert.equal(csr.status, 400);
  assert.match(csr.body.error, /csr: 5000 characters; a certificate request may have at most 4096/);
  const fine = await requestEnrollment(s, 'fine-1', 'worker', { labels: { rack: 'r1', 'example.com/serial': 'abc123' } });
  assert.equal(fine.status, 202);
  const stored = JSON.stringify(states(s).find((r) => r.nodeName === 'fine-1'));
  assert.ok(stored.length < 2048, `${stored.length} bytes stored`);
});

test('new requests are bounded per network (a /24) and in all, not only per address', async () => {
  // The default bursts (10 per address, 20 per network), refilled slowly here so the counts do
  // not depend on how fast this machine sends.
  const s = await server({ requestRate: { burst: 10, perMinute: 1 }, requestNetworkRate: { burst: 20, perMinute: 1 }, requestTotalRate: { burst: 40, perMinute: 1 } });
  const sameNet: number[] = [];
  for (let i = 1; i <= 25; i++) sameNet.push((await requestEnrollment(s, `flood-a-${i}`, 'worker', { localAddress: `127.0.50.${i}` })).status);
  assert.deepEqual(sameNet, [...Array(20).fill(202), ...Array(5).fill(429)]);
  const limited = await requestEnrollment(s, 'flood-a-x', 'worker', { localAddress: '127.0.50.200' });
  assert.match(limited.body.error, /too many enrollment requests from network 127\.0\.50\.0\/24; retry in \d+ s/);
  const spread: number[] = [];
  for (let i = 1; i <= 25; i++) spread.push((await requestEnrollment(s, `flood-b-${i}`, 'worker', { localAddress: `127.0.${50 + i}.1` })).status);
  assert.deepEqual(spread, [...Array(20).fill(202), ...Array(5).fill(429)], 'the total allows 40 at once');
  assert.match((await requestEnrollment(s, 'flood-c', 'worker', { localAddress: '127.0.99.1' })).body.error, /too many enrollment requests from all clients together/);

  // The operator's remedy: deny a network's pending requests at once, then all the rest.
  const fromNet = await cli(s, 'deny', 'enrollment', '--all-pending', '--from', '127.0.50.0/24', '--reason', 'flood');
  assert.equal(fromNet.status, 0, fromNet.stderr);
  assert.match(fromNet.stdout, /^20 pending enrollment requests from 127\.0\.50\.0\/24 denied$/m);
  assert.deepEqual(states(s).filter((r) => r.state === 'Denied').map((r) => r.address).every((a) => a.startsWith('127.0.50.')), true);
  assert.equal(states(s).filter((r) => r.state === 'Pending').length, 20);
  const rest = await cli(s, 'deny', 'enrollment', '--all-pending');
  assert.equal(rest.status, 0, rest.stderr);
  assert.match(rest.stdout, /^20 pending enrollment requests denied$/m);
  assert.equal(states(s).filter((r) => r.state === 'Pending').length, 0);
  const misuse = await cli(s, 'deny', 'enrollment', 'flood-b-1', '--from', '10.0.0.0/8');
  assert.notEqual(misuse.status, 0);
  assert.match(misuse.stderr, /--from CIDR goes with --all-pending/);
  const badCidr = await cli(s, 'deny', 'enrollment', '--all-pending', '--from', '10.0.0.0');
  assert.match(badCidr.stderr, /--from 10\.0\.0\.0: expected a CIDR such as 192\.0\.2\.0\/24/);
});

test('a request its host stops polling expires; a host that keeps polling keeps its place and is approved', async () => {
  const s = await server({ requestRate: { burst: 1000, perMinute: 1000 }, requestIdleTtlMs: 3000 }, 200);
  for (let i = 0; i < 5; i++) assert.equal((await requestEnrollment(s, `abandoned-${i}`, 'worker')).status, 202);
  const real = await requestEnrollment(s, 'real-host', 'worker');
  // The host polls every 300 ms, as an agent does every pollSeconds, until it is answered.
  const answers: number[] = [];
  let answered: any;
  const polling = (async () => {
    while (!answered) {
      const polled = await bootstrapFetch(s, `/enrollment-requests/${real.body.id}`);
      answers.push(polled.status);
      if (polled.status !== 202) answered = polled;
      else await new Promise((r) => setTimeout(r, 300));
    }
  })();
  // Past the idle TTL: the polled request lives on, the others go.
  await new Promise((r) => setTimeout(r, 4500));
  await eventually(() => states(s).every((r) => !r.nodeName.startsWith('abandoned-')), 5000, 'the unpolled requests deleted');
  assert.deepEqual(states(s).map((r) => [r.nodeName, r.state]), [['real-host', 'Pending']]);
  const approved = await cli(s, 'approve', 'enrollment', 'real-host');
  assert.equal(approved.status, 0, approved.stderr);
  await polling;
  assert.ok(answers.slice(0, -1).every((a) => a === 202), `the polled request lived on: ${answers}`);
  assert.equal(answered.body.state, 'Approved');
  assert.match(answered.body.certificate, /BEGIN CERTIFICATE/);
});

test('a full queue answers 503 with a Retry-After of at most a minute, not 10 minutes', async () => {
  const s = await server({ requestRate: { burst: 1000, perMinute: 1000 }, maxPendingRequests: 2 });
  await requestEnrollment(s, 'queued-1', 'worker');
  await requestEnrollment(s, 'queued-2', 'worker');
  const full = await requestEnrollment(s, 'queued-3', 'worker');
  assert.equal(full.status, 503);
  const retryAfter = Number(full.headers['retry-after']);
  assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  assert.match(full.body.error, /2 enrollment requests are already waiting .*; retry in \d+ s/);
});
