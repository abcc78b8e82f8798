// Labels a node reports describe it; they never choose its pool (issue 17, hole 2). On the old
// server a certificate bound to worker registered with `example.com/tier: secure` and a custom
// pool selecting that label handed it its files and secrets (only node-role.kubernetes.io/* was
// filtered). Membership now comes from the credential's pool and from labels an operator sets;
// on a cluster, from labels a kubelet cannot set on its own Node (NodeRestriction).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { kubeletMaySetLabel, poolSelectionLabels, selfReportedSelectorWarnings } from '../../src/machineconfig/index.ts';
import { mcYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const SECURE_POOL = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: secure}
spec:
  machineConfigSelector:
    matchExpressions: [{key: machineconfiguration.openshift.io/role, operator: In, values: [worker, secure]}]
  nodeSelector:
    matchLabels: {example.com/tier: secure}
`;

let server: TestServer;
let c: Clients;
const agents: SimulatedAgent[] = [];
let warnings: string[] = [];
before(async () => {
  server = await startTestServer();
  c = server.admin();
  const applied = await call(c, c.config.apply.bind(c.config), {
    manifests: [
      { source: 'secure.yaml', text: SECURE_POOL },
      { source: 'secret.yaml', text: mcYaml('99-secure-secret', 'secure', '  kernelArguments: [secure-only=1]\n') },
    ],
    dryRun: false,
  }, 'apply');
  warnings = applied.warnings;
});
after(async () => {
  for (const a of agents) a.close();
  await server.close();
});

const getNode = (name: string) => call(c, c.status.getNode.bind(c.status), { name }, 'get node');
const target = async (pool: string) => (await call(c, c.status.getPool.bind(c.status), { name: pool }, 'get pool')).status!.configuration;

test('apply warns about a pool that selects on a label a host could report for itself, naming the label', () => {
  const warning = warnings.find((w) => w.startsWith('MachineConfigPool/secure:'));
  assert.ok(warning, warnings.join('\n'));
  assert.match(warning!, /selects on example\.com\/tier, a label a host may report/);
  assert.match(warning!, /mcctl label node NAME example\.com\/tier=/);
});

test('a worker certificate reporting example.com/tier=secure stays in worker and never receives secure\'s config; an operator\'s label moves it', async () => {
  const a = new SimulatedAgent({ address: server.address, tls: await server.pki.node('tier-claimer', 'worker'), name: 'tier-claimer', labels: { 'example.com/tier': 'secure' }, autoDone: true });
  agents.push(a);
  await a.connect();
  assert.equal(a.pool, 'worker');
  await a.waitFor(() => a.lastAssignment !== undefined);
  const secure = await target('secure');
  assert.equal(a.lastAssignment!.renderedConfig, await target('worker'));
  await new Promise((r) => setTimeout(r, 300));
  assert.ok(a.assignments.every((x) => x.renderedConfig !== secure), 'secure\'s config never sent');
  const node = await getNode('tier-claimer');
  assert.equal(node.pool, 'worker');
  assert.equal(node.labels['example.com/tier'], 'secure', 'the label still describes the host');

  // The operator's word is what counts: the same label, set with mcctl label node.
  const r = await runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', 'label', 'node', 'tier-claimer', 'example.com/tier=secure']);
  assert.equal(r.status, 0, r.stderr);
  await eventually(async () => (await getNode('tier-claimer')).pool === 'secure', 10_000, 'moved to secure by the operator');
  await a.waitFor(() => a.lastAssignment?.renderedConfig === secure);
});

test('a certificate bound to the custom pool joins it: the binding, not the report, decides', async () => {
  const a = new SimulatedAgent({ address: server.address, tls: await server.pki.node('bound-secure', 'secure'), name: 'bound-secure', labels: {}, autoDone: true });
  agents.push(a);
  await a.connect();
  assert.equal(a.pool, 'secure');
});

test('NodeRestriction: the labels a kubelet may set on its own Node never choose a pool', () => {
  for (const key of ['example.com/tier', 'kubernetes.io/hostname', 'topology.kubernetes.io/zone', 'node.kubernetes.io/instance-type', 'kubelet.kubernetes.io/x', 'tier']) {
    assert.equal(kubeletMaySetLabel(key), true, key);
  }
  for (const key of ['node-role.kubernetes.io/worker', 'node-role.kubernetes.io/infra', 'node-restriction.kubernetes.io/tier', 'example.node-restriction.kubernetes.io/x', 'kubernetes.io/role', 'k8s.io/anything']) {
    assert.equal(kubeletMaySetLabel(key), false, key);
  }
  const labels = { 'node-role.kubernetes.io/worker': '', 'node-restriction.kubernetes.io/tier': 'secure', 'example.com/tier': 'secure', 'kubernetes.io/hostname': 'h' };
  assert.deepEqual(poolSelectionLabels(labels, { kubernetes: true }), { 'node-role.kubernetes.io/worker': '', 'node-restriction.kubernetes.io/tier': 'secure' });
  assert.deepEqual(poolSelectionLabels(labels, { kubernetes: false, reported: { 'example.com/tier': 'secure', 'kubernetes.io/hostname': 'h' } }),
    { 'node-role.kubernetes.io/worker': '', 'node-restriction.kubernetes.io/tier': 'secure' });
  // A pool selecting on node-restriction or role labels is not warned about.
  const pool = (matchLabels: Record<string, string>) => ({ metadata: { name: 'p' }, spec: { nodeSelector: { matchLabels } } }) as never;
  assert.deepEqual(selfReportedSelectorWarnings([pool({ 'node-restriction.kubernetes.io/tier': 'secure', 'node-role.kubernetes.io/p': '' })]), []);
  assert.equal(selfReportedSelectorWarnings([pool({ 'example.com/tier': 'secure' })]).length, 1);
});
