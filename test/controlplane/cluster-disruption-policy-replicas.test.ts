// MachineConfiguration/cluster with two mcplane-server replicas on a real etcd: applied through
// one replica, it reaches the cache of the other, whose agent stream gets its assignment again
// with the new policy (the node has not finished its update: it never reports Done here).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { replicaSetFixture } from '../helpers/server-fixture.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';

const { pki, set, agents } = replicaSetFixture({ members: 1, count: 2 });

test('a cluster policy applied on one replica is sent by the replica holding the node\'s stream', async () => {
  const c0 = set.admin(0);
  await call(c0, c0.config.apply.bind(c0.config), { manifests: [{ source: 'infra.yaml', text: readFileSync('examples/infra-machineconfigpool.yaml', 'utf8') }], dryRun: false }, 'apply');
  const agent = new SimulatedAgent({ address: set.addresses[1]!, tls: await pki.node('infra-0', 'infra'), name: 'infra-0', autoDone: false, labels: { 'node-role.kubernetes.io/infra': '' } });
  agents.push(agent);
  await agent.connect();
  await eventually(() => agent.lastAssignment !== undefined, 15_000, 'first assignment');
  assert.equal(agent.lastAssignment!.pool, 'infra');
  assert.equal(agent.lastAssignment!.disruptionPolicyJson, '', 'no policy anywhere yet');

  const count = agent.assignments.length;
  await call(c0, c0.config.apply.bind(c0.config), { manifests: [{ source: 'cluster.yaml', text: readFileSync('examples/machineconfiguration-cluster.yaml', 'utf8') }], dryRun: false }, 'apply');
  await eventually(() => agent.assignments.length > count, 15_000, 'assignment re-sent by the other replica');
  assert.equal(agent.connectedTo, set.addresses[1]);
  assert.deepEqual(JSON.parse(agent.lastAssignment!.disruptionPolicyJson).files, [{ path: '/etc/mcplane-demo/', actions: [{ type: 'restart', unit: 'mcplane-demo-motd.service' }] }]);
});
