// An enrollment token is worth no more than the bootstrap token that paid for it (issue 31, hole
// 9). After `mcctl delete token ID`, or the token's TTL, the enrollment tokens it had minted still
// enrolled new nodes for up to 24 h. Now each records its bootstrap token and is refused, and
// collected, once that token is deleted or expired.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { createCertificateRequest } from '../../src/runtime/pki.ts';
import { bootstrapFetch, ignitionFile } from '../helpers/bootstrap-client.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
let c: Clients;
before(async () => {
  // The leader's sweep at its default (10 min): the check at use is what these tests see.
  server = await startTestServer({ bootstrap: { issueRate: { burst: 1000, perMinute: 1000 }, failureRate: { burst: 1000, perMinute: 1000 } } });
  c = server.admin();
});
after(() => server.close());

const cli = (...args: string[]) => runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', ...args]);
const createToken = (ttlMs = 0) => call(c, c.identity.createBootstrapToken.bind(c.identity), { pool: 'worker', ttlMs, description: '' }, 'create token');
async function enrollmentTokenFrom(bootstrapToken: string): Promise<string> {
  const served = await bootstrapFetch(server, '/config/worker', { token: bootstrapToken });
  assert.equal(served.status, 200, JSON.stringify(served.body));
  return ignitionFile(served.body, '/etc/mcplane/enrollment-token')!;
}
async function enroll(token: string, nodeName: string) {
  const { csrPem } = await createCertificateRequest(nodeName);
  return bootstrapFetch(server, '/enroll', { method: 'POST', body: { token, nodeName, csr: csrPem } });
}

test('after mcctl delete token ID, the enrollment tokens it minted are refused', async () => {
  const created = await createToken();
  const [a, b] = [await enrollmentTokenFrom(created.token), await enrollmentTokenFrom(created.token)];
  // The control: while the bootstrap token lives, its enrollment tokens enroll.
  assert.equal((await enroll(a, 'minted-live')).status, 200);
  const deleted = await cli('delete', 'token', created.info!.id);
  assert.equal(deleted.status, 0, deleted.stderr);
  const refused = await enroll(b, 'minted-after-delete');
  assert.equal(refused.status, 403, JSON.stringify(refused.body));
  assert.match(refused.body.error, new RegExp(`the bootstrap token it was issued with is not \\(BootstrapToken/${created.info!.id} was deleted or has expired\\)`));
  assert.equal(server.handle.controlPlane.cache.nodeRecords.has('minted-after-delete'), false);
});

test('the leader collects the enrollment tokens of a deleted bootstrap token, and keeps the others', async () => {
  const swept = await startTestServer({ bootstrap: true, tokenSweepMs: 200 });
  try {
    const sc = swept.admin();
    const created = await call(sc, sc.identity.createBootstrapToken.bind(sc.identity), { pool: 'worker', ttlMs: 0, description: '' }, 'create token');
    for (const token of [created.token, created.token, 'test-bootstrap-token']) {
      assert.equal((await bootstrapFetch(swept, '/config/worker', { token })).status, 200);
    }
    const stored = async () => (await swept.handle.controlPlane.store.list(['EnrollmentToken'])).items.length;
    assert.equal(await stored(), 3);
    await call(sc, sc.identity.deleteBootstrapToken.bind(sc.identity), { id: created.info!.id }, 'delete token');
    await eventually(async () => (await stored()) === 1, 5000, 'the deleted token\'s enrollment tokens collected');
    await eventually(() => swept.logs.some((l) => l.includes('deleted expired enrollment tokens (or those whose bootstrap token is gone)')), 2000, 'the sweep logged');
  } finally {
    await swept.close();
  }
});

test('after the bootstrap token\'s TTL, the enrollment tokens it minted are refused', async () => {
  const created = await createToken(1500);
  const token = await enrollmentTokenFrom(created.token);
  await new Promise((r) => setTimeout(r, 1800));
  const refused = await enroll(token, 'minted-after-ttl');
  assert.equal(refused.status, 403, JSON.stringify(refused.body));
  assert.match(refused.body.error, /the enrollment token is no longer valid/);
});

test('enrollment tokens from the server\'s token file keep working while the file holds the token', async () => {
  const token = await enrollmentTokenFrom('test-bootstrap-token');
  assert.equal((await enroll(token, 'minted-by-file')).status, 200);
});
