// A node cannot choose its pool (Kubernetes' NodeRestriction, for mcplane): its credential binds
// it to a pool when it is made (enrollment through /config/<pool>, or mcctl pki node --pool),
// role labels its agent claims beyond that are ignored and the node's status says so, and after
// it registers only an operator changes its labels (mcctl label node).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { identityOf } from '../../src/runtime/pki.ts';
import { readFileSync } from 'node:fs';
import { runCliAsync } from '../helpers/run-cli.ts';
import { masterSecretManifests } from '../helpers/manifests.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { server, c, agents } = serverFixture({}, async () => {
  await call(c, c.config.apply.bind(c.config), { manifests: masterSecretManifests('master-only=1'), dryRun: false }, 'apply');
});

const getNode = (name: string) => call(c, c.status.getNode.bind(c.status), { name }, 'get node');
const target = async (pool: string) => (await call(c, c.status.getPool.bind(c.status), { name: pool }, 'get pool')).status!.configuration;

async function agent(name: string, pool: string | undefined, labels: Record<string, string>): Promise<SimulatedAgent> {
  const a = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name, pool), name, labels, autoDone: true });
  await a.connect();
  agents.push(a);
  return a;
}

test('a worker credential that claims the master role joins the worker pool, never receives master\'s config, and the node says why', async () => {
  const a = await agent('sneaky', 'worker', { 'node-role.kubernetes.io/master': '', 'topology.kubernetes.io/zone': 'z1' });
  const worker = await target('worker');
  const master = await target('master');
  await a.waitFor(() => a.lastAssignment !== undefined);
  await new Promise((r) => setTimeout(r, 300));
  assert.ok(a.assignments.every((x) => x.renderedConfig !== master), 'no master config ever sent');
  assert.equal(a.lastAssignment!.renderedConfig, worker);
  const node = await getNode('sneaky');
  assert.equal(node.pool, 'worker');
  assert.deepEqual(node.labels, { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': 'z1' }, 'the role comes from the credential, other labels from the agent');
  assert.match(node.status!.reason, /node-role\.kubernetes\.io\/master, not admitted/);
  assert.ok(server.logs.some((l) => l.includes('"level":"warn"') && l.includes('not admitted') && l.includes('sneaky')));
});

test('a registered node cannot relabel itself: a reconnect with other labels changes nothing', async () => {
  const a = await agent('mover', 'worker', { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': 'z1' });
  await a.waitFor(() => a.lastAssignment !== undefined);
  a.close();
  await eventually(async () => !(await getNode('mover')).status!.connected, 5000, 'disconnected');
  // "Last seen" is when the session ended, not the agent's last status report.
  assert.ok(Date.now() - Number((await getNode('mover')).status!.lastSeenUnixMs) < 3000, 'last seen at the disconnect');
  const again = await agent('mover', 'worker', { 'node-role.kubernetes.io/infra': '', 'topology.kubernetes.io/zone': 'z9' });
  assert.equal(again.pool, 'worker');
  const node = await getNode('mover');
  assert.deepEqual(node.labels, { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': 'z1' });
  assert.match(node.status!.reason, /not admitted/);
});

test('mcctl label node moves a node to another pool and sets its zone; the ignored-labels note goes', async () => {
  await agent('relabelled', 'worker', { 'node-role.kubernetes.io/infra': '' });
  const r = await runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null',
    'label', 'node', 'relabelled', 'node-role.kubernetes.io/infra=', 'node-role.kubernetes.io/worker-', 'topology.kubernetes.io/zone=rack-7']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^node\/relabelled labeled/);
  await eventually(async () => (await getNode('relabelled')).pool === 'infra', 10_000, 'moved to infra');
  const node = await getNode('relabelled');
  assert.deepEqual(node.labels, { 'node-role.kubernetes.io/infra': '', 'topology.kubernetes.io/zone': 'rack-7' });
  assert.doesNotMatch(node.status!.reason, /not admitted/);
  const bad = await runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', 'label', 'node', 'relabelled', 'bad key!=x']);
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /label-syntax/);
});

test('mcctl pki node --pool binds the certificate (OU) and the node joins that pool', async () => {
  const out = await runCliAsync(['pki', 'node', 'infra-host', '--pool', 'infra', '--pki-dir', server.pki.dir]);
  assert.equal(out.status, 0, out.stderr);
  assert.match(out.stdout, /OU=infra, CN=infra-host\): bound to pool infra/);
  const cert = readFileSync(`${server.pki.dir}/nodes/infra-host.crt`);
  assert.equal(identityOf(cert).organizationalUnit, 'infra');
  const a = new SimulatedAgent({ address: server.address, tls: { ca: `${server.pki.dir}/ca.crt`, cert: `${server.pki.dir}/nodes/infra-host.crt`, key: `${server.pki.dir}/nodes/infra-host.key` }, name: 'infra-host', labels: {}, autoDone: true });
  await a.connect();
  agents.push(a);
  assert.equal(a.pool, 'infra');
  await a.waitFor(() => a.lastAssignment?.pool === 'infra');
});
