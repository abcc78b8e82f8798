// Identity comes from the client certificate: a node acts only as itself, and node and operator
// credentials are not interchangeable.

import assert from 'node:assert/strict';
import { status as Status } from '@grpc/grpc-js';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { connect } from '../../src/cli/client/connection.ts';
import { RemoteCallError } from '../../src/machineconfig/index.ts';
import { createCertificateAuthority, ROLE_ADMIN } from '../../src/runtime/pki.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
before(async () => { server = await startTestServer(); });
after(() => server.close());

test('a node certificate cannot register as another node', async () => {
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('node-a'), name: 'node-a', registerAs: 'node-b' });
  await agent.connect();
  assert.equal(agent.error?.code, Status.PERMISSION_DENIED);
  assert.match(agent.error!.details, /certificate is for node node-a; it cannot register as node-b/);
  assert.equal(agent.pool, undefined);
  agent.close();
  const c = server.admin();
  await assert.rejects(call(c, c.status.getNode.bind(c.status), { name: 'node-b' }, 'get'), (e: RemoteCallError) => e.grpcCode === Status.NOT_FOUND);
});

test('a node receives only its own assignment and reports only its own status', async () => {
  const a = new SimulatedAgent({ address: server.address, tls: await server.pki.node('node-a'), name: 'node-a', autoDone: true });
  const b = new SimulatedAgent({ address: server.address, tls: await server.pki.node('node-b'), name: 'node-b' });
  await a.connect();
  await b.connect();
  await a.waitFor(() => a.assignments.length > 0);
  await b.waitFor(() => b.assignments.length > 0);
  // node-b's stream is bound to node-b: a report on it changes node-b, never node-a.
  b.report({ state: 'Degraded', reason: 'pretending to be someone else' });
  const c = server.admin();
  await new Promise((r) => setTimeout(r, 100));
  const nodeA = await call(c, c.status.getNode.bind(c.status), { name: 'node-a' }, 'get');
  const nodeB = await call(c, c.status.getNode.bind(c.status), { name: 'node-b' }, 'get');
  assert.equal(nodeA.status!.state, 'Done');
  assert.equal(nodeB.status!.state, 'Degraded');
  a.close();
  b.close();
});

test('a node certificate cannot use the operator services', async () => {
  const tls = await server.pki.node('node-a');
  const c = connect({ server: server.address, ca: tls.ca, cert: tls.cert, key: tls.key, config: '/dev/null' });
  await assert.rejects(call(c, c.status.listPools.bind(c.status), {}, 'list pools'), (e: RemoteCallError) => {
    assert.equal(e.grpcCode, Status.PERMISSION_DENIED);
    assert.match(e.message, /CN=node-a, O=mcplane:nodes may not use this service: it needs O=mcplane:admins/);
    return true;
  });
  await assert.rejects(call(c, c.config.apply.bind(c.config), { manifests: [], dryRun: false }, 'apply'), (e: RemoteCallError) => e.grpcCode === Status.PERMISSION_DENIED);
  c.close();
});

test('an operator certificate cannot act as an agent', async () => {
  const agent = new SimulatedAgent({ address: server.address, tls: { ca: `${server.pki.dir}/ca.crt`, cert: `${server.pki.dir}/admin.crt`, key: `${server.pki.dir}/admin.key` }, name: 'admin' });
  await agent.connect();
  assert.equal(agent.error?.code, Status.PERMISSION_DENIED);
  assert.match(agent.error!.details, /not a node certificate/);
  agent.close();
});

test('a certificate from another CA is refused at the TLS layer (UNAVAILABLE, explained)', async () => {
  const otherCa = await createCertificateAuthority('some other CA');
  const forged = await server.pki.client('forged-admin', 'admin', ROLE_ADMIN, otherCa);
  const c = connect({ server: server.address, ca: forged.ca, cert: forged.cert, key: forged.key, timeout: '3', config: '/dev/null' });
  await assert.rejects(call(c, c.status.listPools.bind(c.status), {}, 'list pools'), (e: RemoteCallError) => {
    assert.equal(e.grpcCode, Status.UNAVAILABLE);
    assert.match(e.message, /it most likely rejected the client certificate .*forged-admin\.crt/);
    return true;
  });
  c.close();
});

test('plaintext is refused off loopback, and TLS is required unless asked for', async () => {
  const { startServer } = await import('../../src/controlplane/server.ts');
  await assert.rejects(startServer({ dataDir: '/tmp/unused', listen: '0.0.0.0:0', insecure: true }), /allowed only on a loopback address/);
  await assert.rejects(startServer({ dataDir: '/tmp/unused', listen: '127.0.0.1:0' }), /TLS is required/);
  assert.throws(() => connect({ server: '10.1.2.3:7443', insecure: true, config: '/dev/null' }), /only for a loopback server/);
});
