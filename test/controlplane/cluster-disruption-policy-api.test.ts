// MachineConfiguration/cluster over real gRPC: Apply and Delete like the other kinds, every
// problem named, and the assignments agents get carry the cluster policy under their pool's.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { call } from '../../src/cli/client/call.ts';
import { RemoteCallError } from '../../src/machineconfig/index.ts';
import { assertApplyRefused } from '../helpers/apply-refusal.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { server, c, agents } = serverFixture();

const apply = (text: string, source = 'cluster.yaml') => call(c, c.config.apply.bind(c.config), { manifests: [{ source, text }], dryRun: false }, 'apply');
const example = readFileSync('examples/machineconfiguration-cluster.yaml', 'utf8');
const infraPool = readFileSync('examples/infra-machineconfigpool.yaml', 'utf8');
/** A text with one part replaced; fails if the part is not there (the example changed). */
function changed(text: string, from: string, to: string): string {
  assert.ok(text.includes(from), `the text contains ${JSON.stringify(from)}`);
  return text.replace(from, to);
}

test('Apply of MachineConfiguration/cluster creates, reports unchanged, configures; Delete removes it', async () => {
  assert.deepEqual((await apply(example)).objects.map((o) => `${o.kind}/${o.name}:${o.action}`), ['MachineConfiguration/cluster:created']);
  assert.equal((await apply(example)).objects[0]!.action, 'unchanged');
  assert.equal((await apply(changed(example, '- path: /etc/mcplane-demo/', '- path: /etc/mcplane-demo2/'))).objects[0]!.action, 'configured');
  await call(c, c.config.delete.bind(c.config), { kind: 'MachineConfiguration', name: 'cluster' }, 'delete');
  await assert.rejects(call(c, c.config.delete.bind(c.config), { kind: 'MachineConfiguration', name: 'cluster' }, 'delete'),
    (e: RemoteCallError) => e.grpcCode === Status.NOT_FOUND && /MachineConfiguration\/cluster not found/.test(e.message));
  assert.equal((await apply(example)).objects[0]!.action, 'created');
});

test('an invalid MachineConfiguration is INVALID_ARGUMENT naming object, field and rule, and nothing of the Apply is stored', async () => {
  const goodConfig = 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 30-with-bad-policy}\nspec: {kernelArguments: [ok]}\n';
  const bad = `apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata: {name: default}
spec:
  nodeDisruptionPolicy:
    files:
      - path: etc/registries.conf
        actions: [{type: Special}]
    units:
      - name: crio
        actions: [{type: Reload, reload: {serviceName: crio.service}}, {type: Reboot}]
`;
  await assertApplyRefused(c, [{ source: 'mc.yaml', text: goodConfig }, { source: 'bad.yaml', text: bad }], [
    'bad.yaml#0 MachineConfiguration/default metadata.name cluster-name',
    'bad.yaml#0 MachineConfiguration/default spec.nodeDisruptionPolicy.files[0].path path-absolute',
    'bad.yaml#0 MachineConfiguration/default spec.nodeDisruptionPolicy.files[0].actions[0].type reserved-action',
    'bad.yaml#0 MachineConfiguration/default spec.nodeDisruptionPolicy.units[0].name service-name',
    'bad.yaml#0 MachineConfiguration/default spec.nodeDisruptionPolicy.units[0].actions standalone-action',
  ]);
  await assert.rejects(call(c, c.config.getMachineConfig.bind(c.config), { name: '30-with-bad-policy' }, 'get'), (e: RemoteCallError) => e.grpcCode === Status.NOT_FOUND);
  await assert.rejects(call(c, c.config.delete.bind(c.config), { kind: 'MachineConfiguration', name: 'default' }, 'delete'), (e: RemoteCallError) => e.grpcCode === Status.NOT_FOUND);
});

test('a node in a custom pool gets the cluster policy under its pool\'s; a changed policy reaches an unfinished update, not a node Done on its config', async () => {
  await apply(changed(infraPool, '  paused: false', '  paused: false\n  disruptionPolicy:\n    sshkey:\n      actions: [{type: reboot}]'), 'infra.yaml');
  const labels = { 'node-role.kubernetes.io/infra': '' };
  const done = new SimulatedAgent({ address: server.address, tls: await server.pki.node('infra-0', 'infra'), name: 'infra-0', autoDone: true, labels });
  const failing = new SimulatedAgent({ address: server.address, tls: await server.pki.node('infra-1', 'infra'), name: 'infra-1', autoDone: false, labels });
  agents.push(done, failing);
  await done.connect();
  await failing.connect();
  await eventually(() => done.lastAssignment !== undefined && failing.lastAssignment !== undefined, 10_000, 'first assignments');
  assert.equal(done.lastAssignment!.pool, 'infra');
  const first = JSON.parse(done.lastAssignment!.disruptionPolicyJson);
  assert.deepEqual(first.files, [{ path: '/etc/mcplane-demo/', actions: [{ type: 'restart', unit: 'mcplane-demo-motd.service' }] }]);
  assert.deepEqual(first.sshkey, { actions: [{ type: 'reboot' }] }, 'the pool\'s own entry');
  // infra-1's update failed: it retries when its assignment comes again.
  const config = failing.lastAssignment!.renderedConfig;
  failing.report({ desiredConfig: config, state: 'Degraded', phase: 'actions', reason: 'actions: restart mcplane-demo-motd.service: job ended "failed"' });
  await eventually(async () => (await call(c, c.status.getNode.bind(c.status), { name: 'infra-1' }, 'get')).status!.state === 'Degraded', 10_000, 'infra-1 Degraded');

  const [doneCount, failingCount] = [done.assignments.length, failing.assignments.length];
  await apply(changed(example, '          - type: Restart\n            restart:\n              serviceName: mcplane-demo-motd.service\n    units:', '          - type: None\n    units:'));
  await eventually(() => failing.assignments.length > failingCount, 10_000, 'the unfinished update gets the new policy');
  assert.deepEqual(JSON.parse(failing.lastAssignment!.disruptionPolicyJson).files, [{ path: '/etc/mcplane-demo/', actions: [{ type: 'none' }] }]);
  // A node Done on its config never plans with it again: its next config brings the policy then.
  assert.equal(done.assignments.length, doneCount, 'nothing re-sent to the node that is Done');
  assert.deepEqual(JSON.parse(done.lastAssignment!.disruptionPolicyJson), first);

  const before = failing.assignments.length;
  await call(c, c.config.delete.bind(c.config), { kind: 'MachineConfiguration', name: 'cluster' }, 'delete');
  await eventually(() => failing.assignments.length > before, 10_000, 'assignment re-sent after delete');
  assert.deepEqual(JSON.parse(failing.lastAssignment!.disruptionPolicyJson), { sshkey: { actions: [{ type: 'reboot' }] } });
});
