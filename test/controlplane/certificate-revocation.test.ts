// A node record is bound to one certificate (issue 17, hole 3). On the old server, after
// `mcctl delete node reuse-1` and a re-enrollment of reuse-1 into master, the old worker
// certificate for reuse-1 registered and got master's config. Now any other certificate for the
// name is refused, `delete node` revokes the bound one, and `mcctl node revoke` ends the node's
// open stream at once.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { bootstrapFetch, enrollHost } from '../helpers/bootstrap-client.ts';
import { mcYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
let c: Clients;
const agents: SimulatedAgent[] = [];
before(async () => {
  server = await startTestServer({ bootstrap: { issueRate: { burst: 1000, perMinute: 1000 }, failureRate: { burst: 1000, perMinute: 1000 } } });
  c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'm.yaml', text: mcYaml('99-master-secret', 'master', '  kernelArguments: [master-secret=1]\n') }], dryRun: false }, 'apply');
});
after(async () => {
  for (const a of agents) a.close();
  await server.close();
});

const cli = (...args: string[]) => runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', ...args]);
const connectAs = async (name: string, tls: { ca: string; cert: string; key: string }, labels: Record<string, string> = {}) => {
  const a = new SimulatedAgent({ address: server.address, tls, name, labels, autoDone: true });
  agents.push(a);
  await a.connect();
  return a;
};

test('delete node, then re-enroll the name into master: the old worker certificate is refused, and never gets master\'s config', async () => {
  const oldTls = await enrollHost(server, 'worker', 'test-bootstrap-token', 'reuse-1');
  const old = await connectAs('reuse-1', oldTls);
  assert.equal(old.pool, 'worker');
  old.close();
  await eventually(async () => !(await call(c, c.status.getNode.bind(c.status), { name: 'reuse-1' }, 'get')).status!.connected, 5000, 'disconnected');

  const deleted = await cli('delete', 'node', 'reuse-1');
  assert.equal(deleted.status, 0, deleted.stderr);
  const newTls = await enrollHost(server, 'master', 'test-master-bootstrap-token', 'reuse-1');
  const fresh = await connectAs('reuse-1', newTls);
  assert.equal(fresh.pool, 'master');
  fresh.close();

  const back = await connectAs('reuse-1', oldTls);
  assert.equal(back.pool, undefined, 'no pool for the old certificate');
  assert.equal(back.error?.code, Status.PERMISSION_DENIED);
  assert.match(back.error!.details, /revoked when the node was deleted/);
  assert.equal(back.assignments.length, 0, 'nothing assigned to the old certificate');
});

test('a second certificate for a registered name is refused, naming the one the node is bound to', async () => {
  const first = await connectAs('bound-1', await server.pki.node('bound-1', 'worker'));
  assert.equal(first.pool, 'worker');
  first.close();
  // Another certificate for the same name (here: another pool's, from the same CA).
  const other = await connectAs('bound-1', await server.pki.node('bound-1', 'master'));
  assert.equal(other.error?.code, Status.PERMISSION_DENIED);
  assert.match(other.error!.details, /Node\/bound-1 is bound to another certificate \(serial [0-9a-f]+, expires .*\); this one \(serial [0-9a-f]+\) is refused/);
  assert.equal(other.assignments.length, 0);
});

test('mcctl node revoke ends the open stream at once and refuses the certificate after; a new certificate binds the node again', async () => {
  const tls = await server.pki.node('revoked-1', 'worker');
  const a = await connectAs('revoked-1', tls);
  assert.equal(a.pool, 'worker');
  const r = await cli('node', 'revoke', 'revoked-1');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /node\/revoked-1: certificate [0-9a-f]+ revoked/);
  await a.waitFor(() => a.ended, 5000);
  assert.equal(a.error?.code, Status.PERMISSION_DENIED);
  assert.match(a.error!.details, /certificate of node revoked-1 was revoked/);
  const again = await connectAs('revoked-1', tls);
  assert.equal(again.error?.code, Status.PERMISSION_DENIED);
  assert.match(again.error!.details, /was revoked at .* by admin/);
  // Issued at the generation the revoke raised the name to (1), as enrollment would issue it.
  const replacement = await connectAs('revoked-1', await server.pki.node('revoked-1', 'master', 1));
  assert.equal(replacement.error, undefined);
  assert.equal(replacement.pool, 'worker', 'the node keeps its labels; the new certificate only binds it');
});

test('delete node of a connected node revokes it and ends its stream; an unknown node is a clear error', async () => {
  const a = await connectAs('deleted-live', await server.pki.node('deleted-live', 'worker'));
  const r = await cli('delete', 'node', 'deleted-live');
  assert.equal(r.status, 0, r.stderr);
  await a.waitFor(() => a.ended, 5000);
  assert.equal(a.error?.code, Status.PERMISSION_DENIED);
  assert.match(a.error!.details, /Node\/deleted-live was deleted/);
  const nodes = (await call(c, c.status.listNodes.bind(c.status), { pool: '', limit: 0, continueToken: '' }, 'list')).nodes.map((n) => n.name);
  assert.ok(!nodes.includes('deleted-live'), 'not re-created by the ended stream');
  const unknown = await cli('node', 'revoke', 'nobody');
  assert.notEqual(unknown.status, 0);
  assert.match(unknown.stderr, /Node\/nobody not found/);
});

test('enrollment binds the node to the issued certificate before it ever connects', async () => {
  const served = await bootstrapFetch(server, '/config/worker', { token: 'test-bootstrap-token' });
  assert.equal(served.status, 200);
  const tls = await enrollHost(server, 'worker', 'test-bootstrap-token', 'pre-bound');
  // Another certificate for the name, issued by the operator, cannot take the enrolled identity.
  const squatter = await connectAs('pre-bound', await server.pki.node('pre-bound', 'worker'));
  assert.equal(squatter.error?.code, Status.PERMISSION_DENIED);
  const owner = await connectAs('pre-bound', tls);
  assert.equal(owner.error, undefined);
  assert.equal(owner.pool, 'worker');
});
