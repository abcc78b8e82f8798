// The cluster-wide disruption policy (MCO's MachineConfiguration/cluster) reaching a real agent in
// a custom pool: a real control plane (mTLS gRPC), a real systemd user manager over D-Bus, the
// rpm-ostree and reboot stand-ins. The pool has a policy of its own that does not cover the file,
// which is how the demo's infra node came to reboot before the cluster policy existed.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { demoServiceConfig } from '../helpers/manifests.ts';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { untilNode } from '../helpers/converge.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let server: TestServer;
let c: Clients;
let host: SandboxHost;

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
const infraPool = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: infra}
spec:
  machineConfigSelector:
    matchExpressions:
      - {key: machineconfiguration.openshift.io/role, operator: In, values: [worker, infra]}
  nodeSelector:
    matchLabels: {node-role.kubernetes.io/infra: ""}
  disruptionPolicy:
    units:
      - {name: demo.service, actions: [{type: daemon-reload}, {type: restart, unit: demo.service}]}
`;
const config = (motd: string) => demoServiceConfig(motd);

before(async () => {
  if (skip) return;
  server = await startTestServer();
  c = server.admin();
  host = new SandboxHost({ name: 'infra-a', server: server.address, pki: server.pki, pool: 'infra', labels: { 'node-role.kubernetes.io/infra': '' } });
});
after(async () => {
  if (skip) return;
  await host.stop();
  await server.close();
});

const target = async () => (await call(c, c.status.getPool.bind(c.status), { name: 'infra' }, 'get')).status!.configuration;
const apply = (source: string, text: string) => call(c, c.config.apply.bind(c.config), { manifests: [{ source, text }], dryRun: false }, 'apply');

test('a node in a custom pool follows the cluster policy with its pool\'s entries on top: no reboot to take its config', { skip }, async () => {
  await apply('cluster.yaml', clusterPolicy);
  await apply('infra.yaml', infraPool);
  await apply('demo.yaml', config('hello'));
  await host.start();
  const want = await target();
  const node = await untilNode(c, [host], 'infra-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(node.pool, 'infra');
  assert.equal(host.reboots, 0);
  // The file's restart (cluster) and the unit's daemon-reload and restart (the pool's, not the cluster's None).
  assert.equal(node.status!.lastDisruption, 'daemon-reload, restart demo.service');
  assert.equal(host.file('etc/demo/motd'), 'hello');
});

test('a file change covered only by the cluster policy restarts its unit over D-Bus, without a reboot', { skip }, async () => {
  host.systemd.systemctl('start', 'demo.service');
  const before = host.systemd.systemctl('show', '-p', 'ActiveEnterTimestampMonotonic', 'demo.service').stdout;
  await apply('demo.yaml', config('changed'));
  const want = await target();
  const node = await untilNode(c, [host], 'infra-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(host.reboots, 0, 'no reboot');
  assert.equal(node.status!.lastDisruption, 'restart demo.service');
  assert.equal(host.file('etc/demo/motd'), 'changed');
  assert.equal(host.systemd.systemctl('is-active', 'demo.service').stdout.trim(), 'active');
  assert.notEqual(host.systemd.systemctl('show', '-p', 'ActiveEnterTimestampMonotonic', 'demo.service').stdout, before);
});

test('without the cluster policy the same change reboots the node (MCO\'s default)', { skip }, async () => {
  await call(c, c.config.delete.bind(c.config), { kind: 'MachineConfiguration', name: 'cluster' }, 'delete');
  await apply('demo.yaml', config('again'));
  const want = await target();
  const node = await untilNode(c, [host], 'infra-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(host.reboots, 1);
  assert.match(node.status!.lastDisruption, /^reboot: file \/etc\/demo\/motd changed: no disruption policy covers it$/);
});
