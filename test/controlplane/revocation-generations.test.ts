// A revoke or a delete takes away every certificate ever issued for a node, not only the one it
// was bound to last (issue 31, holes 1-3 and 12). Each certificate carries the node name's
// generation; `mcctl node revoke` and `mcctl delete node` raise it, and every replica refuses,
// and ends the streams of, certificates of an older one. Before, a node's trust was one bound
// serial checked at registration: the certificate it renewed from kept its stream and could
// bind the node again after a revoke, and an older one re-created a deleted node.

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { certificateBinding } from '../../src/runtime/pki.ts';
import { enrollHost } from '../helpers/bootstrap-client.ts';
import { mcYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
let c: Clients;
const agents: SimulatedAgent[] = [];
before(async () => {
  server = await startTestServer({ signing: true, bootstrap: { issueRate: { burst: 1000, perMinute: 1000 }, failureRate: { burst: 1000, perMinute: 1000 } } });
  c = server.admin();
});
after(async () => {
  for (const a of agents) a.close();
  await server.close();
});

type Files = { ca: string; cert: string; key: string };
const cli = (...args: string[]) => runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', ...args]);
const agent = async (name: string, tls: Files) => {
  const a = new SimulatedAgent({ address: server.address, tls, name, autoDone: true });
  agents.push(a);
  await a.connect();
  return a;
};
/** A certificate and its key as files another agent (a thief) can connect with. */
function filesOf(issued: { certificatePem: string; keyPem: string }): Files {
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-stolen-'));
  const files = { ca: join(server.pki.dir, 'ca.crt'), cert: join(dir, 'node.crt'), key: join(dir, 'node.key') };
  writeFileSync(files.cert, issued.certificatePem);
  writeFileSync(files.key, issued.keyPem, { mode: 0o600 });
  return files;
}
const getNode = (name: string) => call(c, c.status.getNode.bind(c.status), { name }, 'get');
/** The serial of the certificate the stored node record is bound to ('' when none). */
const boundSerial = (name: string): string => server.handle.controlPlane.cache.nodeRecords.get(name)?.value.certificate?.serial ?? '';

test('revoke after renewals: the stream of the certificate it renewed from ends, and that certificate never binds the node again', async () => {
  const a = await agent('gen-1', await server.pki.node('gen-1'));
  await a.renew(); // A -> B, on a stream opened with B
  const b = { certificatePem: a.certificatePem, keyPem: a.keyPem };
  // B -> C issued, but the agent (or whoever holds B) stays on B's stream.
  const c3 = await a.requestCertificate();
  assert.equal(boundSerial('gen-1'), certificateBinding(c3.certificatePem).serial, 'bound to C');

  const revoked = await cli('node', 'revoke', 'gen-1');
  assert.equal(revoked.status, 0, revoked.stderr);
  await a.waitFor(() => a.ended, 5000);
  assert.equal(a.error?.code, Status.PERMISSION_DENIED);
  assert.match(a.error!.details, /generation 0; every certificate of node gen-1 before generation 1 was revoked/);

  // B registers again: refused, so it can neither rebind the node nor renew.
  const thief = await agent('gen-1', filesOf(b));
  assert.equal(thief.pool, undefined);
  assert.equal(thief.error?.code, Status.PERMISSION_DENIED);
  assert.match(thief.error!.details, /serial [0-9a-f]+\) is of generation 0/);
  // C too (bound when revoked: listed by serial as well).
  const withC = await agent('gen-1', filesOf(c3));
  assert.equal(withC.error?.code, Status.PERMISSION_DENIED);
  assert.equal(boundSerial('gen-1'), '', 'the node is bound to nothing after the revoke');
});

test('revoke, then an unexpired certificate two renewals old is refused; a certificate of the new generation binds the node', async () => {
  const first = await server.pki.node('gen-2');
  const a = await agent('gen-2', first);
  await a.renew();
  await a.renew(); // A -> B -> C, switching each time
  a.close();
  await eventually(async () => !(await getNode('gen-2')).status?.connected, 5000, 'gen-2 disconnected');
  const revoked = await cli('node', 'revoke', 'gen-2');
  assert.equal(revoked.status, 0, revoked.stderr);
  assert.match(revoked.stdout, /every certificate issued for gen-2 before generation 1; .*mcctl pki node gen-2 --generation 1/);

  const old = await agent('gen-2', first);
  assert.equal(old.pool, undefined, 'A does not take the node back');
  assert.equal(old.error?.code, Status.PERMISSION_DENIED);
  assert.match(old.error!.details, /is of generation 0; every certificate of node gen-2 before generation 1 was revoked at .* by admin; the host must enroll again/);
  assert.equal(boundSerial('gen-2'), '');

  // The legitimate path: a certificate issued at generation 1 binds it, and renews at 1.
  const next = await agent('gen-2', await server.pki.node('gen-2', 'worker', 1));
  assert.equal(next.error, undefined);
  assert.equal(next.pool, 'worker');
  await next.renew();
  assert.equal(certificateBinding(next.certificatePem).generation, 1, 'renewed at the current generation');
  // A second revoke raises it again: the generation-1 certificates go too.
  const again = await cli('node', 'revoke', 'gen-2');
  assert.equal(again.status, 0, again.stderr);
  await next.waitFor(() => next.ended, 5000);
  assert.match(next.error!.details, /revoked/);
});

test('delete node, then an older certificate cannot re-create it; enrollment after the delete can', async () => {
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'm.yaml', text: mcYaml('99-worker-gen', 'worker', '  kernelArguments: [gen=1]\n') }], dryRun: false }, 'apply');
  const first = await enrollHost(server, 'worker', 'test-bootstrap-token', 'gen-3');
  const a = await agent('gen-3', first);
  await a.renew(); // the enrolled certificate is now the one it renewed from: unbound, unrevoked
  a.close();
  await eventually(async () => !(await getNode('gen-3')).status?.connected, 5000, 'gen-3 disconnected');
  const deleted = await cli('delete', 'node', 'gen-3');
  assert.equal(deleted.status, 0, deleted.stderr);

  const old = await agent('gen-3', first);
  assert.equal(old.error?.code, Status.PERMISSION_DENIED);
  assert.match(old.error!.details, /revoked when the node was deleted/);
  assert.equal(old.assignments.length, 0, 'nothing assigned to the older certificate');
  const nodes = (await call(c, c.status.listNodes.bind(c.status), { pool: '', limit: 0, continueToken: '' }, 'list')).nodes.map((n) => n.name);
  assert.ok(!nodes.includes('gen-3'), 'the deleted node is not re-created');

  // The host enrolls again with a token: its certificate is of generation 1 and binds the name.
  const fresh = await agent('gen-3', await enrollHost(server, 'worker', 'test-bootstrap-token', 'gen-3'));
  assert.equal(fresh.error, undefined);
  assert.equal(fresh.pool, 'worker');
  assert.equal(certificateBinding(fresh.certificatePem).generation, 1);
});

test('a revoked node is shown disconnected at once and gets no new config', async () => {
  const a = await agent('gen-4', await server.pki.node('gen-4'));
  await eventually(async () => (await getNode('gen-4')).status?.connected === true, 5000, 'gen-4 connected');
  const revoked = await cli('node', 'revoke', 'gen-4');
  assert.equal(revoked.status, 0, revoked.stderr);
  await a.waitFor(() => a.ended, 5000);
  // The session record goes with the stream (before, it stayed until the replica's lease ended).
  await eventually(async () => (await getNode('gen-4')).status?.connected === false, 3000, 'gen-4 shown disconnected');
  const assigned = a.assignments.length;
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'm.yaml', text: mcYaml('99-worker-gen-4', 'worker', '  kernelArguments: [gen4=1]\n') }], dryRun: false }, 'apply');
  const listed = await cli('get', 'nodes', 'gen-4');
  assert.equal(listed.status, 0, listed.stderr);
  assert.doesNotMatch(listed.stdout, /\bTrue\b.*gen-4|gen-4.*\bCONNECTED\b.*True/);
  assert.equal(a.assignments.length, assigned, 'nothing sent to the ended stream');
});
