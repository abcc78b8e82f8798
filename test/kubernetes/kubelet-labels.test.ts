// With --kubeconfig, a node's labels come from its Node object, and a kubelet may set some of its
// own Node's labels (NodeRestriction allows anything outside kubernetes.io/k8s.io but
// node-restriction.kubernetes.io/). Those never choose a pool (issue 17, hole 2): on the old
// server a kubelet setting `example.com/tier: secure` on itself joined a pool selecting it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { addNode } from '../helpers/kube-workloads.ts';
import { kubeStandInPerTest } from '../helpers/kube-stand-in-fixture.ts';
import { eventually } from '../helpers/simulated-agent.ts';

const pool = (name: string, matchLabels: Record<string, string>) => `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: ${name}}
spec:
  machineConfigSelector: {matchLabels: {machineconfiguration.openshift.io/role: ${name}}}
  nodeSelector: {matchLabels: ${JSON.stringify(matchLabels)}}
`;

const { standIn, server, startStandIn, startServer, connectAgent } = kubeStandInPerTest();

test('a label a kubelet may set on its own Node never chooses a pool; a node-restriction label an administrator sets does', async () => {
  await startStandIn();
  // k1's kubelet labelled itself (--node-labels); k2 was labelled by an administrator.
  addNode(standIn, 'k1', { 'node-role.kubernetes.io/worker': '', 'example.com/tier': 'secure' });
  addNode(standIn, 'k2', { 'node-role.kubernetes.io/worker': '', 'node-restriction.kubernetes.io/tier': 'secure' });
  await startServer();
  const c = server.admin();
  const applied = await call(c, c.config.apply.bind(c.config), {
    manifests: [
      { source: 'self.yaml', text: pool('self-chosen', { 'example.com/tier': 'secure' }) },
      { source: 'admin.yaml', text: pool('admin-chosen', { 'node-restriction.kubernetes.io/tier': 'secure' }) },
    ],
    dryRun: false,
  }, 'apply');
  assert.ok(applied.warnings.some((w) => w.startsWith('MachineConfigPool/self-chosen: nodeSelector selects on example.com/tier')), applied.warnings.join('\n'));
  assert.ok(!applied.warnings.some((w) => w.startsWith('MachineConfigPool/admin-chosen')), 'a node-restriction label is an administrator\'s');
  for (const name of ['k1', 'k2']) await connectAgent(name, { labels: {} });
  const node = (name: string) => call(c, c.status.getNode.bind(c.status), { name }, 'get node');
  await eventually(async () => (await node('k2')).pool === 'admin-chosen', 5000, 'k2 in admin-chosen');
  const k1 = await node('k1');
  assert.equal(k1.labels['example.com/tier'], 'secure', 'the label is shown: it describes the node');
  assert.equal(k1.pool, 'worker');
});
