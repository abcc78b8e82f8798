// Enrollment approval (issue 17, identity lifecycle), as Flight Control does it: a host without a
// bootstrap token asks to join on the bootstrap endpoint and waits; an operator approves or
// denies with mcctl, or a server rule approves a pool's hosts by name pattern. Through the real
// HTTP endpoint, the real mcctl binary and a real agent stream.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { connect, type Clients } from '../../src/cli/client/connection.ts';
import { resolveOptions } from '../../src/controlplane/main.ts';
import { approveEnrollmentRequest } from '../../src/controlplane/api/enrollment-requests.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { certificateBinding, identityOf } from '../../src/runtime/pki.ts';
import { bootstrapFetch, credentialsFrom, enrollHost, requestEnrollment } from '../helpers/bootstrap-client.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
let c: Clients;
before(async () => {
  server = await startTestServer({
    bootstrap: {
      issueRate: { burst: 1000, perMinute: 1000 }, failureRate: { burst: 1000, perMinute: 1000 }, requestRate: { burst: 1000, perMinute: 1000 },
      autoApprove: [{ pool: 'worker', nodeNamePattern: 'edge-*' }],
    },
  });
  c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'infra.yaml', text: poolYaml('infra') }], dryRun: false }, 'apply');
});
after(() => server.close());

const cli = (...args: string[]) => runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', ...args]);
const nodeExists = (name: string) => call(c, c.status.getNode.bind(c.status), { name }, 'get node').then(() => true, () => false);

test('a request without a token waits as Pending: the host polls it by id, and mcctl get enrollments lists it', async () => {
  const asked = await requestEnrollment(server, 'waiting-1', 'infra', { labels: { rack: 'r7' } });
  assert.equal(asked.status, 202, JSON.stringify(asked.body));
  assert.equal(asked.body.state, 'Pending');
  assert.match(asked.body.id, /^[0-9a-f]{64}$/);
  assert.equal(asked.headers.location, `/enrollment-requests/${asked.body.id}`);
  assert.equal(asked.body.certificate, undefined);

  const polled = await bootstrapFetch(server, `/enrollment-requests/${asked.body.id}`);
  assert.equal(polled.status, 202);
  assert.equal(polled.body.state, 'Pending');
  // The same key asking again (a lost answer) is the same request; under another name it is refused.
  const again = await requestEnrollment(server, 'waiting-1', 'infra', { key: asked });
  assert.equal(again.body.id, asked.body.id);
  const renamed = await requestEnrollment(server, 'someone-else', 'infra', { key: asked });
  assert.equal(renamed.status, 409);
  assert.match(renamed.body.error, /this key already asked to join as waiting-1 in pool infra/);
  assert.equal((await bootstrapFetch(server, `/enrollment-requests/${'0'.repeat(64)}`)).status, 404);

  const listed = await cli('get', 'enrollments');
  assert.equal(listed.status, 0, listed.stderr);
  assert.match(listed.stdout, /^ID\s+NODE\s+POOL\s+STATE\s+ADDRESS\s+AGE/m);
  assert.match(listed.stdout, new RegExp(`^${asked.body.id.slice(0, 16)}\\s+waiting-1\\s+infra\\s+Pending\\s+(::ffff:)?127\\.0\\.0\\.1\\s`, 'm'));
  const yaml = await cli('get', 'enrollment', 'waiting-1', '-o', 'yaml');
  assert.equal(yaml.status, 0, yaml.stderr);
  assert.match(yaml.stdout, /kind: EnrollmentRequest/);
  assert.match(yaml.stdout, /rack: r7/);
  assert.equal(await nodeExists('waiting-1'), false, 'no Node record before a decision');
});

test('mcctl approve enrollment NAME: the host\'s poll gets an OU=<pool> certificate that connects and joins that pool', async () => {
  const asked = await requestEnrollment(server, 'approved-1', 'infra');
  assert.equal(asked.status, 202);
  const approved = await cli('approve', 'enrollment', 'approved-1');
  assert.equal(approved.status, 0, approved.stderr);
  assert.match(approved.stdout, /approved: node approved-1 joins pool infra \(certificate [0-9a-f]+ issued\)/);

  const polled = await bootstrapFetch(server, `/enrollment-requests/${asked.body.id}`);
  assert.equal(polled.status, 200);
  assert.equal(polled.body.state, 'Approved');
  const id = identityOf(polled.body.certificate);
  assert.deepEqual(id, { commonName: 'approved-1', organization: 'mcplane:nodes', organizationalUnit: 'infra' });
  assert.equal(polled.body.ca, readFileSync(`${server.pki.dir}/ca.crt`, 'utf8'));
  // Bound in the same commit: the Node record names this certificate.
  const record = server.handle.controlPlane.cache.nodeRecords.get('approved-1');
  assert.equal(record?.value.certificate?.sha256, certificateBinding(polled.body.certificate).sha256);
  assert.equal(record?.value.enrolledFor, 'infra');

  const agent = new SimulatedAgent({ address: server.address, tls: credentialsFrom(server, 'approved-1', polled.body.certificate, asked.keyPem), name: 'approved-1', autoDone: true });
  await agent.connect();
  try {
    assert.equal(agent.pool, 'infra');
    await agent.waitFor(() => agent.lastAssignment !== undefined);
    assert.match(agent.lastAssignment!.renderedConfig, /^rendered-infra-/);
  } finally {
    agent.close();
  }
  const wide = await cli('get', 'enrollments', '-o', 'wide');
  assert.match(wide.stdout, /approved-1\s+infra\s+Approved\s+\S+\s+\S+\s+admin\s/);
  // A decision is final.
  const twice = await cli('approve', 'enrollment', asked.body.id);
  assert.notEqual(twice.status, 0);
  assert.match(twice.stderr, /was already approved by admin/);
});

test('mcctl deny enrollment NAME --reason: the poll says denied with the reason, and no Node record exists', async () => {
  const asked = await requestEnrollment(server, 'denied-1', 'infra');
  const denied = await cli('deny', 'enrollment', asked.body.id.slice(0, 12), '--reason', 'unknown serial number');
  assert.equal(denied.status, 0, denied.stderr);
  assert.match(denied.stdout, /denied: node denied-1 \(from \S+\) does not join pool infra; the host is told: unknown serial number/);
  const polled = await bootstrapFetch(server, `/enrollment-requests/${asked.body.id}`);
  assert.equal(polled.status, 200);
  assert.deepEqual([polled.body.state, polled.body.reason, polled.body.certificate], ['Denied', 'unknown serial number', undefined]);
  assert.equal(await nodeExists('denied-1'), false);
  const approve = await cli('approve', 'enrollment', asked.body.id);
  assert.notEqual(approve.status, 0);
  assert.match(approve.stderr, /was already denied by admin \(unknown serial number\)/);
});

test('an auto-approve rule approves its pool\'s matching names at once, and nothing else', async () => {
  const edge = await requestEnrollment(server, 'edge-1', 'worker');
  assert.equal(edge.status, 200, JSON.stringify(edge.body));
  assert.equal(edge.body.state, 'Approved');
  assert.equal(identityOf(edge.body.certificate).organizationalUnit, 'worker');
  assert.ok(await nodeExists('edge-1'));
  // Same pattern, another pool (master above all); another name, same pool: both wait.
  const master = await requestEnrollment(server, 'edge-2', 'master');
  assert.equal(master.body.state, 'Pending');
  const other = await requestEnrollment(server, 'core-1', 'worker');
  assert.equal(other.body.state, 'Pending');
  const wide = await cli('get', 'enrollments', '-o', 'wide');
  assert.match(wide.stdout, /edge-1\s+worker\s+Approved\s+\S+\s+\S+\s+auto-approve rule worker=edge-\*\s/);
  assert.ok(server.logs.some((l) => l.includes('enrollment request auto-approved') && l.includes('edge-1')));
});

test('--enrollment-auto-approve POOL=GLOB and the config key enrollmentAutoApprove give the same rules; bad rules are clear errors', async () => {
  const { writeFileSync, mkdtempSync } = await import('node:fs');
  const dir = mkdtempSync('/tmp/mcplane-auto-approve-');
  writeFileSync(`${dir}/config.yaml`, `pkiDir: ${server.pki.dir}\nenrollmentAutoApprove:\n  - pool: worker\n    nodeNamePattern: "edge-*"\n  - infra=rack?-*\n`);
  const fromFile = resolveOptions({ config: `${dir}/config.yaml` });
  const fromFlags = resolveOptions({ pkiDir: server.pki.dir, enrollmentAutoApprove: ['worker=edge-*', 'infra=rack?-*'] });
  assert.deepEqual(fromFile.bootstrap?.autoApprove, [{ pool: 'worker', nodeNamePattern: 'edge-*' }, { pool: 'infra', nodeNamePattern: 'rack?-*' }]);
  assert.deepEqual(fromFlags.bootstrap?.autoApprove, fromFile.bootstrap?.autoApprove);
  assert.throws(() => resolveOptions({ pkiDir: server.pki.dir, enrollmentAutoApprove: ['*=edge-*'] }), /--enrollment-auto-approve \*=edge-\*: expected POOL=GLOB with POOL a pool's name .*no pattern/);
  assert.throws(() => resolveOptions({ pkiDir: server.pki.dir, enrollmentAutoApprove: ['worker'] }), /expected POOL=GLOB/);
  assert.throws(() => resolveOptions({ pkiDir: server.pki.dir, bootstrap: false, enrollmentAutoApprove: ['worker=a*'] }), /needs the bootstrap endpoint/);
});

test('approval refuses a name already registered, with a clear error, and creates nothing', async () => {
  await enrollHost(server, 'worker', 'test-bootstrap-token', 'taken-1');
  const asked = await requestEnrollment(server, 'taken-1', 'worker');
  assert.equal(asked.body.state, 'Pending');
  const approve = await cli('approve', 'enrollment', 'taken-1');
  assert.notEqual(approve.status, 0);
  assert.match(approve.stderr, /Node\/taken-1 is already registered; approving would give a second host its identity \(delete the node first: mcctl delete node taken-1, or deny this request\)/);
  assert.equal((await bootstrapFetch(server, `/enrollment-requests/${asked.body.id}`)).body.state, 'Pending');
  // Two hosts asking for one name: the name is ambiguous, the id is not.
  const second = await requestEnrollment(server, 'twin', 'infra');
  await requestEnrollment(server, 'twin', 'infra');
  const ambiguous = await cli('approve', 'enrollment', 'twin');
  assert.notEqual(ambiguous.status, 0);
  assert.match(ambiguous.stderr, /"twin" names 2 enrollment requests .*; give the ID instead/);
  const byId = await cli('approve', 'enrollment', second.body.id);
  assert.equal(byId.status, 0, byId.stderr);
  await assert.rejects(call(c, c.identity.approveEnrollmentRequest.bind(c.identity), { name: 'twin' }, 'approve'), /Node\/twin is already registered/);
});

test('a node certificate cannot list, approve or deny enrollment requests', async () => {
  await requestEnrollment(server, 'victim-1', 'master');
  const tls = await server.pki.node('sneaky-1', 'worker');
  const r = await runCliAsync(['--server', server.address, '--ca', tls.ca, '--cert', tls.cert, '--key', tls.key, '--config', '/dev/null', 'approve', 'enrollment', 'victim-1']);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /needs O=mcplane:admins/);
  const node = connect({ server: server.address, ca: tls.ca, cert: tls.cert, key: tls.key, config: '/dev/null' });
  try {
    await assert.rejects(call(node, node.identity.listEnrollmentRequests.bind(node.identity), {}, 'list'), /needs O=mcplane:admins/);
    await assert.rejects(call(node, node.identity.denyEnrollmentRequest.bind(node.identity), { name: 'victim-1', reason: '' }, 'deny'), /needs O=mcplane:admins/);
  } finally {
    node.close();
  }
  assert.equal(await nodeExists('victim-1'), false);
  assert.equal((await call(c, c.identity.listEnrollmentRequests.bind(c.identity), {}, 'list')).requests.find((q) => q.nodeName === 'victim-1')?.state, 'Pending');
});

test('an approval stored by a replica without the CA key is signed by the bootstrap endpoint when the host polls', async () => {
  const asked = await requestEnrollment(server, 'lazy-1', 'infra');
  const cp = server.handle.controlPlane;
  // What a replica started without the CA key (no bootstrap endpoint) does on ApproveEnrollmentRequest.
  const stored = await approveEnrollmentRequest({ cache: cp.cache, store: cp.store, signer: undefined, log: createLogger({ level: 'silent' }) }, 'lazy-1', 'admin');
  assert.equal(stored.value.certificate, undefined);
  assert.equal(cp.cache.nodeRecords.get('lazy-1')?.value.certificate, undefined, 'the name is reserved, bound to no certificate yet');
  const polled = await bootstrapFetch(server, `/enrollment-requests/${asked.body.id}`);
  assert.equal(polled.status, 200);
  assert.equal(polled.body.state, 'Approved');
  assert.equal(identityOf(polled.body.certificate).organizationalUnit, 'infra');
  assert.equal(cp.cache.nodeRecords.get('lazy-1')?.value.certificate?.sha256, certificateBinding(polled.body.certificate).sha256);
  // Polled again: the same certificate, not a second one.
  assert.equal((await bootstrapFetch(server, `/enrollment-requests/${asked.body.id}`)).body.certificate, polled.body.certificate);
});

test('pending requests are bounded in number and per address, and expire unanswered', async () => {
  const small = await startTestServer({ bootstrap: { requestRate: { burst: 5, perMinute: 1 }, maxPendingRequests: 2, requestTtlMs: 1500, autoApprove: [{ pool: 'worker', nodeNamePattern: 'auto-*' }] }, tokenSweepMs: 200 });
  try {
    const first = await requestEnrollment(small, 'bounded-1', 'worker');
    assert.equal((await requestEnrollment(small, 'bounded-2', 'worker')).status, 202);
    const full = await requestEnrollment(small, 'bounded-3', 'worker');
    assert.equal(full.status, 503);
    assert.match(full.body.error, /2 enrollment requests are already waiting \(the limit: pending ones, and auto-approved hosts not yet connected\)/);
    assert.ok(Number(full.headers['retry-after']) > 0);
    // A rule's approvals hold places too (issue 31: phantoms made outside the cap), so a full
    // queue holds it up as well.
    assert.equal((await requestEnrollment(small, 'auto-1', 'worker')).status, 503);
    // Unanswered, they expire: the host is told, the operator no longer sees them, room is made.
    await new Promise((r) => setTimeout(r, 2000));
    const gone = await bootstrapFetch(small, `/enrollment-requests/${first.body.id}`);
    assert.equal(gone.status, 404);
    assert.match(gone.body.error, /it expired, or was never made/);
    assert.deepEqual([...small.handle.controlPlane.cache.enrollmentRequests.values()].map((o) => o.value.nodeName), [], 'the collector deleted the unanswered ones');
    assert.equal((await requestEnrollment(small, 'auto-1', 'worker')).body.state, 'Approved');
    // Five requests from this address used its burst (the refused ones count: they were asked);
    // the next waits its turn.
    const throttled = await requestEnrollment(small, 'bounded-5', 'worker');
    assert.equal(throttled.status, 429);
    assert.match(throttled.body.error, /too many enrollment requests from/);
  } finally {
    await small.close();
  }
});
