// mcctl import of a cluster's MachineConfigNodes (the Kubernetes API stand-in with MCO's CRD, read
// by the real @kubernetes/client-node; the real server; an enrolled agent speaking the real agent
// protocol). MCO writes one per node: its status, which mcplane does not store as its own. Import
// reports each against mcplane's view of the node (managed or not, MCO's current and desired
// config, whether mcplane has that config, same or different) and stores nothing of it.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startKubeApiStandIn, type KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { call } from '../../src/cli/client/call.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { assertCallsAllowed } from './rbac.ts';

const MCO = 'machineconfiguration.openshift.io';
let standIn: KubeApiStandIn;
let server: TestServer;
let agent: SimulatedAgent;
before(async () => {
  standIn = await startKubeApiStandIn({ machineConfigNodeCrd: true });
  server = await startTestServer();
});
after(async () => {
  agent?.close();
  await server?.close();
  await standIn?.close();
});

/** A MachineConfigNode as MCO's daemon writes it (types_machineconfignode.go, v1). */
const clusterMcn = (node: string, current: string, desired: string, updated: 'True' | 'False') => ({
  apiVersion: `${MCO}/v1`, kind: 'MachineConfigNode',
  metadata: { name: node, uid: `u-${node}`, generation: 4 },
  spec: { node: { name: node }, pool: { name: 'worker' }, configVersion: { desired } },
  status: { observedGeneration: 4, configVersion: { current, desired }, conditions: [{ type: 'Updated', status: updated, reason: 'Updated', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' }] },
});

test('each cluster MachineConfigNode is compared with mcplane\'s node, and none of it is stored', async () => {
  standIn.add({ apiVersion: `${MCO}/v1`, kind: 'MachineConfigPool', metadata: { name: 'worker' }, spec: { machineConfigSelector: { matchLabels: { [`${MCO}/role`]: 'worker' } }, nodeSelector: { matchLabels: { 'node-role.kubernetes.io/worker': '' } } } } as never);
  standIn.add({ apiVersion: `${MCO}/v1`, kind: 'MachineConfig', metadata: { name: '50-chrony', labels: { [`${MCO}/role`]: 'worker' } }, spec: { config: { ignition: { version: '3.4.0' }, storage: { files: [{ path: '/etc/chrony.conf', contents: { source: 'data:,server%20ntp1' } }] } } } } as never);
  standIn.add({ apiVersion: `${MCO}/v1`, kind: 'MachineConfig', metadata: { name: 'rendered-worker-0123abcd' }, spec: { config: { ignition: { version: '3.4.0' } } } } as never);
  // host-a: done under MCO; its agent has enrolled with mcplane. host-b: MCO left it mid-update; no agent yet.
  standIn.add(clusterMcn('host-a', 'rendered-worker-0123abcd', 'rendered-worker-0123abcd', 'True') as never);
  standIn.add(clusterMcn('host-b', 'rendered-worker-0123abcd', 'rendered-worker-4567ef01', 'False') as never);
  const kubeconfig = standIn.writeKubeconfig(mkdtempSync(join(tmpdir(), 'mcctl-import-mcn-')));
  const env = { MCPLANE_SERVER: server.address, MCPLANE_PKI_DIR: server.pki.dir };

  const c = server.admin();
  const first = await runCliAsync(['import', '--kubeconfig', kubeconfig], { env });
  assert.equal(first.status, 0, first.stderr);
  assert.match(first.stdout, /^machineconfig\/50-chrony created$/m);
  const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
  assert.match(target, /^rendered-worker-/);

  agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('host-a'), name: 'host-a', autoDone: true, labels: { 'node-role.kubernetes.io/worker': '' } });
  await agent.connect();
  await eventually(async () => (await call(c, c.status.getMachineConfigNode.bind(c.status), { name: 'host-a' }, 'mcn')).status?.currentConfig === target, 20_000, 'host-a on the target');
  // host-c: a node the cluster already reports on mcplane's config.
  standIn.add(clusterMcn('host-c', target, target, 'True') as never);

  const r = await runCliAsync(['import', '--kubeconfig', kubeconfig], { env });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('machineconfignode/'));
  assert.deepEqual(lines, [
    `machineconfignode/host-a compared: cluster (MCO): pool worker, current rendered-worker-0123abcd, desired rendered-worker-0123abcd; rendered-worker-0123abcd is not in mcplane (it renders its own); mcplane: pool worker, current ${target}, desired ${target}; different config`,
    'machineconfignode/host-b compared: cluster (MCO): pool worker, current rendered-worker-0123abcd, desired rendered-worker-4567ef01 (MCO had not finished its update); rendered-worker-0123abcd is not in mcplane (it renders its own); mcplane: not managed (no agent of this name has enrolled)',
    `machineconfignode/host-c compared: cluster (MCO): pool worker, current ${target}, desired ${target}; ${target} is in mcplane; mcplane: not managed (no agent of this name has enrolled)`,
  ]);
  // Nothing of the cluster's status became mcplane's: host-a's MachineConfigNode is still its
  // agent's, and no node came into being for host-b or host-c.
  const ours = await call(c, c.status.listMachineConfigNodes.bind(c.status), { pool: '' }, 'list');
  assert.deepEqual(ours.machineConfigNodes.map((m) => [m.name, m.status?.currentConfig]), [['host-a', target]]);
  await assert.rejects(call(c, c.status.getMachineConfigNode.bind(c.status), { name: 'host-b' }, 'mcn'), /not found/i);
  assert.ok(assertCallsAllowed(standIn.requests) > 0, 'listing machineconfignodes is allowed by packaging/kubernetes/rbac.yaml');
});

test('a cluster without the MachineConfigNode CRD: nothing compared, nothing said', async () => {
  const old = await startKubeApiStandIn();
  try {
    old.add({ apiVersion: `${MCO}/v1`, kind: 'MachineConfig', metadata: { name: '60-motd', labels: { [`${MCO}/role`]: 'worker' } }, spec: { config: { ignition: { version: '3.4.0' }, storage: { files: [{ path: '/etc/motd', contents: { source: 'data:,hi' } }] } } } } as never);
    const kubeconfig = old.writeKubeconfig(mkdtempSync(join(tmpdir(), 'mcctl-import-nomcn-')));
    const r = await runCliAsync(['import', '--kubeconfig', kubeconfig], { env: { MCPLANE_SERVER: server.address, MCPLANE_PKI_DIR: server.pki.dir } });
    assert.equal(r.status, 0, r.stderr);
    assert.doesNotMatch(r.stdout + r.stderr, /machineconfignode/);
  } finally {
    await old.close();
  }
});
