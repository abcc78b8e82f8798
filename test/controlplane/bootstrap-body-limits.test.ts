// Oversized bodies and refusal logging on the bootstrap endpoint (issue 31, hole 8). A body over
// 64 KiB on /enrollment-requests or /enroll got a 500: reading stopped, the socket went, and the
// handler's read of req.socket.remoteAddress threw, an error-level stack trace each time; and it
// counted as no failure, so it was never throttled. The 409 path logged a warning per request
// without bound. Now: a 413 saying the limit, counted as a failure, and refusals logged within a
// budget.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createCertificateRequest } from '../../src/runtime/pki.ts';
import { bootstrapFetch } from '../helpers/bootstrap-client.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
before(async () => { server = await startTestServer({ bootstrap: true }); });
after(() => server.close());

const refusalLines = (from: number): string[] => server.logs.slice(from).filter((l) => l.includes('bootstrap request refused'));
const big = (field: string) => JSON.stringify({ token: 't', nodeName: 'big-host', pool: 'worker', csr: 'x', [field]: 'y'.repeat(100 * 1024) });

test('a body over the limit on /enrollment-requests and /enroll is a 413 naming the limit: no 500, no stack trace', async () => {
  const before = server.logs.length;
  for (const [path, address] of [['/enrollment-requests', '127.0.20.1'], ['/enroll', '127.0.20.2']] as const) {
    const r = await bootstrapFetch(server, path, { method: 'POST', rawBody: big('csr'), localAddress: address });
    assert.equal(r.status, 413, `${path}: ${r.status} ${JSON.stringify(r.body)}`);
    assert.match(r.body.error, /the body is larger than 16384 bytes, the most a request to this endpoint needs/);
  }
  await new Promise((r) => setTimeout(r, 50));
  const logged = server.logs.slice(before);
  assert.ok(!logged.some((l) => l.includes('"level":"error"')), logged.filter((l) => l.includes('"level":"error"')).join('\n').slice(0, 2000));
  assert.ok(!logged.some((l) => l.includes('bootstrap request failed')));
  assert.equal(refusalLines(before).filter((l) => l.includes('"status":413')).length, 2, 'each is a warning naming the client, as other refusals');
});

test('oversized bodies count as failures: ten from one address, then 429 with Retry-After', async () => {
  const statuses: number[] = [];
  let retryAfter: unknown;
  for (let i = 0; i < 13; i++) {
    const r = await bootstrapFetch(server, '/enrollment-requests', { method: 'POST', rawBody: big('labels'), localAddress: '127.0.20.3' });
    statuses.push(r.status);
    if (r.status === 429) retryAfter ??= r.headers['retry-after'];
  }
  assert.deepEqual(statuses, [...Array(10).fill(413), 429, 429, 429]);
  assert.ok(Number(retryAfter) >= 1, `Retry-After ${retryAfter}`);
});

test('the 409 path (one key asking under other names) is a counted failure, and its warnings are bounded', async () => {
  const key = await createCertificateRequest('keyed');
  const first = await bootstrapFetch(server, '/enrollment-requests', { method: 'POST', body: { nodeName: 'keyed-0', pool: 'worker', csr: key.csrPem }, localAddress: '127.0.21.1' });
  assert.equal(first.status, 202, JSON.stringify(first.body));
  const before = server.logs.length;
  const statuses: number[] = [];
  for (let i = 1; i <= 40; i++) {
    statuses.push((await bootstrapFetch(server, '/enrollment-requests', { method: 'POST', body: { nodeName: `keyed-${i}`, pool: 'worker', csr: key.csrPem }, localAddress: '127.0.21.1' })).status);
  }
  assert.deepEqual(statuses.slice(0, 10), Array(10).fill(409));
  assert.ok(statuses.slice(10).every((s) => s === 429), String(statuses));
  const lines = refusalLines(before).length;
  assert.ok(lines >= 10 && lines <= 11, `${lines} refusal lines for 40 refusals`);
});

test('refusals from many addresses are logged within an overall budget, not one line each', async () => {
  const before = server.logs.length;
  const bad = JSON.stringify({ nodeName: 'Not A Name', pool: 'worker', csr: 'x' });
  // 150 clients on three /24s, each refused once (the per-network limit answers some with 429).
  for (let net = 0; net < 3; net++) {
    await Promise.all(Array.from({ length: 50 }, (_, i) => bootstrapFetch(server, '/enrollment-requests', { method: 'POST', rawBody: bad, localAddress: `127.0.${30 + net}.${i + 1}` })));
  }
  const lines = refusalLines(before).length;
  assert.ok(lines <= 61, `${lines} refusal lines for 150 refusals`);
  // The earlier tests' refusals spent some of this minute's budget.
  assert.ok(lines >= 20, `${lines}: refusals are still logged, within the budget`);
});
