// Auto-approved hosts that never connect (issue 31, hole 7). With `--enrollment-auto-approve
// worker=edge-*`, one anonymous request for a node that never connects used up the pool's
// maxUnavailable=1, so the real node never got the next config; 250 more Node records were
// created in 3.4 s outside the 1,000 cap, and never expired. Now a node that never registered is
// no machine of its pool (it spends no budget), auto-approvals hold places in the capped queue
// and pass the request rate limits, and a node that never connects goes with its request.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { certificateBinding } from '../../src/runtime/pki.ts';
import { credentialsFrom, requestEnrollment } from '../helpers/bootstrap-client.ts';
import { mcYaml } from '../helpers/manifests.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const closing: (() => unknown)[] = [];
after(async () => { for (const f of closing.reverse()) await f(); });
const AUTO = [{ pool: 'worker', nodeNamePattern: 'edge-*' }];

test('an auto-approved node that never connects spends none of maxUnavailable: the real node gets the next config', async () => {
  const server = await startTestServer({ bootstrap: { autoApprove: AUTO } });
  closing.push(() => server.close());
  const real = new SimulatedAgent({ address: server.address, tls: await server.pki.node('real-1', 'worker'), name: 'real-1', autoDone: true });
  await real.connect();
  closing.push(() => real.close());
  await real.waitFor(() => real.status.currentConfig !== '' && real.status.currentConfig === real.lastAssignment?.renderedConfig);
  const first = real.lastAssignment!.renderedConfig;

  const phantom = await requestEnrollment(server, 'edge-phantom', 'worker');
  assert.equal(phantom.body.state, 'Approved', JSON.stringify(phantom.body));
  const c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'mc.yaml', text: mcYaml('50-worker-next', 'worker', '  kernelArguments: [next=1]\n') }], dryRun: false }, 'apply');
  await eventually(() => real.lastAssignment?.renderedConfig !== first, 10_000, 'the real node assigned the new config despite the phantom');
  const pool = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool');
  assert.equal(Number(pool.status!.machineCount), 1, 'the phantom is no machine of the pool');
  assert.ok(server.handle.controlPlane.cache.nodes.has('edge-phantom'), 'it is still listed as a node until it expires');
});

test('auto-approvals hold places in the capped queue until their hosts connect', async () => {
  const server = await startTestServer({ bootstrap: { autoApprove: AUTO, maxPendingRequests: 3, requestRate: { burst: 1000, perMinute: 1000 } } });
  closing.push(() => server.close());
  const approved = [];
  for (let i = 1; i <= 3; i++) {
    const r = await requestEnrollment(server, `edge-${i}`, 'worker');
    assert.equal(r.body.state, 'Approved');
    approved.push(r);
  }
  const fourth = await requestEnrollment(server, 'edge-4', 'worker');
  assert.equal(fourth.status, 503, JSON.stringify(fourth.body));
  assert.match(fourth.body.error, /3 enrollment requests are already waiting \(the limit: pending ones, and auto-approved hosts not yet connected\)/);
  assert.equal(server.handle.controlPlane.cache.nodeRecords.has('edge-4'), false, 'no Node record beyond the cap');
  // A host that connects frees its place.
  const tls = credentialsFrom(server, 'edge-3', approved[2]!.body.certificate, approved[2]!.keyPem);
  const agent = new SimulatedAgent({ address: server.address, tls, name: 'edge-3' });
  await agent.connect();
  closing.push(() => agent.close());
  await eventually(() => server.handle.controlPlane.cache.nodeRecords.get('edge-3')?.value.registered === true, 5000, 'edge-3 registered');
  assert.equal((await requestEnrollment(server, 'edge-4', 'worker')).body.state, 'Approved');
});

test('an auto-approved node that never connects is deleted with its request, its certificate revoked; one that connected stays; auto-approvals are rate-limited', async () => {
  const server = await startTestServer({ bootstrap: { autoApprove: AUTO, requestIdleTtlMs: 4000, requestTotalRate: { burst: 5, perMinute: 1 } }, tokenSweepMs: 200 });
  closing.push(() => server.close());
  const cache = server.handle.controlPlane.cache;
  const ghost = await requestEnrollment(server, 'edge-ghost', 'worker');
  const kept = await requestEnrollment(server, 'edge-kept', 'worker');
  assert.deepEqual([ghost.body.state, kept.body.state], ['Approved', 'Approved']);
  const agent = new SimulatedAgent({ address: server.address, tls: credentialsFrom(server, 'edge-kept', kept.body.certificate, kept.keyPem), name: 'edge-kept' });
  await agent.connect();
  closing.push(() => agent.close());
  await eventually(() => cache.nodeRecords.get('edge-kept')?.value.registered === true, 4000, 'edge-kept registered before its request expired');
  await eventually(() => !cache.nodeRecords.has('edge-ghost'), 10_000, 'the never-connected node deleted');
  assert.ok(cache.revokedCertificates.has(certificateBinding(ghost.body.certificate).sha256), 'its certificate is revoked');
  assert.ok(cache.nodeRecords.has('edge-kept'), 'the connected one stays');
  assert.equal(cache.enrollmentRequests.has(ghost.body.id), false, 'the request went with it');
  // Its certificate no longer joins.
  const late = new SimulatedAgent({ address: server.address, tls: credentialsFrom(server, 'edge-ghost', ghost.body.certificate, ghost.keyPem), name: 'edge-ghost' });
  await late.connect().catch(() => undefined);
  late.close();
  assert.ok(late.error, `the late ghost registered: pool ${late.pool}`);
  assert.equal(cache.nodeRecords.has('edge-ghost'), false);
  // Two made, three more fit the total's burst of five; the sixth waits, approvable or not.
  for (let i = 0; i < 3; i++) assert.equal((await requestEnrollment(server, `edge-more-${i}`, 'worker')).body.state, 'Approved');
  const sixth = await requestEnrollment(server, 'edge-sixth', 'worker');
  assert.equal(sixth.status, 429);
  assert.match(sixth.body.error, /too many enrollment requests from all clients together/);
});
