// A shared bootstrap token cannot be locked (issue 31, hole 10). The worker token is in every
// worker's pointer config; ten failing requests with it from one address made every other host
// presenting it get 429, and one request every 6 s kept it so. Failures are throttled per client
// address, and, for requests without a valid credential, per network (IPv4 /24, IPv6 /64) and
// per presented token: never per valid token.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sourceNetwork } from '../../src/runtime/rate-limiter.ts';
import { bootstrapFetch } from '../helpers/bootstrap-client.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const WORKER_TOKEN = 'test-bootstrap-token';
let server: TestServer;
// The default burst (10 failures per address, 50 per network), refilled slowly here so the
// counts do not depend on how fast this machine sends.
before(async () => { server = await startTestServer({ bootstrap: { failureRate: { burst: 10, perMinute: 1 } } }); });
after(() => server.close());

test('thirty failures with the worker token from one address: that address gets 429, every other host presenting the token is served', async () => {
  const statuses: number[] = [];
  for (let i = 0; i < 30; i++) statuses.push((await bootstrapFetch(server, '/config/master', { token: WORKER_TOKEN, localAddress: '127.0.40.1' })).status);
  assert.deepEqual(statuses.slice(0, 10), Array(10).fill(403));
  assert.ok(statuses.slice(10).every((s) => s === 429), String(statuses));
  // The noisy holder is throttled for its own requests, valid or not.
  assert.equal((await bootstrapFetch(server, '/config/worker', { token: WORKER_TOKEN, localAddress: '127.0.40.1' })).status, 429);
  // Its neighbour on the same /24 and a host elsewhere, with the same token: served.
  for (const address of ['127.0.40.2', '127.0.41.1']) {
    const r = await bootstrapFetch(server, '/config/worker', { token: WORKER_TOKEN, localAddress: address });
    assert.equal(r.status, 200, `${address}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
  }
});

test('guesses spread over a /24 are throttled by the network; a valid token from that network is still served', async () => {
  const statuses: number[] = [];
  for (let i = 1; i <= 60; i++) statuses.push((await bootstrapFetch(server, '/config/worker', { token: `guess-${i}`, localAddress: `127.0.42.${i}` })).status);
  assert.deepEqual(statuses.slice(0, 50), Array(50).fill(403), 'five times the per-address budget per network');
  assert.deepEqual(statuses.slice(50), Array(10).fill(429));
  const throttled = await bootstrapFetch(server, '/config/worker', { token: 'guess-x', localAddress: '127.0.42.100' });
  assert.match(throttled.body.error, /too many failed requests from 127\.0\.42\.100 or its network/);
  assert.equal((await bootstrapFetch(server, '/config/worker', { token: WORKER_TOKEN, localAddress: '127.0.42.101' })).status, 200);
  // Anonymous guessing of request ids is counted by network too.
  const polls: number[] = [];
  for (let i = 1; i <= 5; i++) polls.push((await bootstrapFetch(server, `/enrollment-requests/${'0'.repeat(64)}`, { localAddress: `127.0.42.${110 + i}` })).status);
  assert.deepEqual(polls, Array(5).fill(429));
});

test('networks: an IPv4 /24 (IPv4-mapped too) and an IPv6 /64', () => {
  assert.equal(sourceNetwork('192.0.2.77'), '192.0.2.0/24');
  assert.equal(sourceNetwork('::ffff:192.0.2.77'), '192.0.2.0/24');
  assert.equal(sourceNetwork('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  assert.equal(sourceNetwork('2001:db8::1'), '2001:db8:0:0::/64');
  assert.equal(sourceNetwork('::1'), '0:0:0:0::/64');
  assert.equal(sourceNetwork('fe80::1%eth0'), 'fe80:0:0:0::/64');
});
