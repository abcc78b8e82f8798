// Enrollment tokens do not pile up: expired ones are deleted by the leader, and one client
// address can make the endpoint issue only so many.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { afterEach, test } from 'node:test';
import { createCertificateRequest } from '../../src/runtime/pki.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
afterEach(() => server.close());

function fetch(path: string, options: { token?: string; body?: unknown } = {}) {
  const ca = readFileSync(join(server.pki.dir, 'ca.crt'));
  return new Promise<{ status: number; headers: Record<string, unknown>; body: any }>((resolve, reject) => {
    const headers: Record<string, string> = options.token ? { authorization: `Bearer ${options.token}` } : {};
    const req = request({ host: '127.0.0.1', port: server.handle.bootstrapPort, path, method: options.body ? 'POST' : 'GET', ca, servername: 'localhost', headers }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(options.body === undefined ? undefined : JSON.stringify(options.body));
  });
}

const enrollmentToken = (ignition: any): string => {
  const f = ignition.storage.files.find((x: any) => x.path === '/etc/mcplane/enrollment-token');
  return Buffer.from(f.contents.source.split(',')[1], 'base64').toString('utf8');
};

test('expired enrollment tokens are deleted from the store by the leader', async () => {
  server = await startTestServer({ bootstrap: { tokenTtlMs: 300 }, tokenSweepMs: 200 });
  const res = await fetch('/config/worker', { token: 'test-bootstrap-token' });
  assert.equal(res.status, 200);
  const token = enrollmentToken(res.body);
  const stored = async () => (await server.handle.controlPlane.store.list(['EnrollmentToken'])).items.length;
  assert.equal(await stored(), 1);
  await eventually(async () => (await stored()) === 0, 5000, 'the expired token deleted');
  const { csrPem } = await createCertificateRequest('late');
  const late = await fetch('/enroll', { body: { token, nodeName: 'late-host', csr: csrPem } });
  assert.equal(late.status, 403);
  assert.match(late.body.error, /not valid/);
  assert.ok(server.logs.some((l) => l.includes('deleted expired enrollment tokens')));
});

test('token issuing is rate-limited per client address: 429 with Retry-After, and a warning', async () => {
  server = await startTestServer({ bootstrap: { issueRate: { burst: 3, perMinute: 6 } } });
  const statuses: number[] = [];
  let retryAfter: unknown;
  for (let i = 0; i < 5; i++) {
    const res = await fetch('/config/worker', { token: 'test-bootstrap-token' });
    statuses.push(res.status);
    if (res.status === 429) {
      retryAfter = res.headers['retry-after'];
      assert.match(res.body.error, /too many config requests from 127\.0\.0\.1/);
    }
  }
  assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
  assert.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= 10, `Retry-After ${retryAfter}`);
  assert.equal((await server.handle.controlPlane.store.list(['EnrollmentToken'])).items.length, 3, 'refused requests issue no token');
  assert.ok(server.logs.some((l) => l.includes('"level":"warn"') && l.includes('over the rate limit') && l.includes('127.0.0.1')));
});
