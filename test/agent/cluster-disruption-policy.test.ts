// The cluster-wide disruption policy (MCO's MachineConfiguration/cluster) reaching a real agent in
// a custom pool: a real control plane (mTLS gRPC), a real systemd user manager over D-Bus, the
// rpm-ostree and reboot stand-ins. The pool has a policy of its own that does not cover the file,
// which is how the demo's infra node came to reboot before the cluster policy existed.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { demoServiceConfig, INFRA_POOL_WITH_UNIT_POLICY } from '../helpers/manifests.ts';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { assertDemoRestartedWithoutReboot } from '../helpers/demo-service-checks.ts';
import { sandboxFixture } from '../helpers/sandbox-fixture.ts';

let host: SandboxHost;
const { skip, server, c, hosts, apply, target } = sandboxFixture({
  setUp: async () => { hosts.push(host = new SandboxHost({ name: 'infra-a', server: server.address, pki: server.pki, pool: 'infra', labels: { 'node-role.kubernetes.io/infra': '' } })); },
});

// As an OpenShift user writes it. Its unit entry is overridden by the pool's own below.
const clusterPolicy = `apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  managementState: Managed
  nodeDisruptionPolicy:
    files:
      - path: /etc/demo/
        actions:
          - type: Drain
          - type: Restart
            restart:
              serviceName: demo.service
    units:
      - name: demo.service
        actions:
          - type: None
`;
// A custom pool taking the worker configs, with a policy of its own for the unit only.
const infraPool = INFRA_POOL_WITH_UNIT_POLICY;
const config = (motd: string) => demoServiceConfig(motd);

test('a node in a custom pool follows the cluster policy with its pool\'s entries on top: no reboot to take its config', { skip }, async () => {
  await apply(clusterPolicy);
  await apply(infraPool);
  await apply(config('hello'));
  await host.start();
  const want = await target('infra');
  const node = await untilNode(c, [host], 'infra-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(node.pool, 'infra');
  assert.equal(host.reboots, 0);
  // The file's restart (cluster) and the unit's daemon-reload and restart (the pool's, not the cluster's None).
  assert.equal(node.status!.lastDisruption, 'daemon-reload, restart demo.service');
  assert.equal(host.file('etc/demo/motd'), 'hello');
});

test('a file change covered only by the cluster policy restarts its unit over D-Bus, without a reboot', { skip }, async () => {
  await assertDemoRestartedWithoutReboot(c, host, async () => {
    await apply(config('changed'));
    return target('infra');
  }, 'changed');
});

test('without the cluster policy the same change reboots the node (MCO\'s default)', { skip }, async () => {
  await call(c, c.config.delete.bind(c.config), { kind: 'MachineConfiguration', name: 'cluster' }, 'delete');
  await apply(config('again'));
  const want = await target('infra');
  const node = await untilNode(c, [host], 'infra-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(host.reboots, 1);
  assert.match(node.status!.lastDisruption, /^reboot: file \/etc\/demo\/motd changed: no disruption policy covers it$/);
});
