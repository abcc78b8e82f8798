// With --kubeconfig the leader keeps MCO's MachineConfigNode objects in the cluster when the
// cluster has their CRD: one per managed node, spec and status as mcctl get mcn shows them, the
// status on its subresource, deleted when the node goes. Without the CRD nothing is written, and
// the log says so once. Real server, simulated agents over the real agent stream, the Kubernetes
// API stand-in (with and without the MachineConfigNode CRD).

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startKubeApiStandIn, type KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { addNode } from '../helpers/kube-workloads.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { assertCallsAllowed } from './rbac.ts';

type Obj = Record<string, any>;

async function start(crd: boolean, names: string[]): Promise<{ standIn: KubeApiStandIn; server: TestServer; agents: Map<string, SimulatedAgent>; conn: string[] }> {
  const standIn = await startKubeApiStandIn({ timeScale: 0.01, machineConfigNodeCrd: crd });
  for (const n of names) addNode(standIn, n, { 'node-role.kubernetes.io/worker': '' });
  const kubeconfig = standIn.writeKubeconfig(mkdtempSync(join(tmpdir(), 'mcn-sync-')));
  const server = await startTestServer({ kubernetes: { kubeconfig }, drain: { retryBaseMs: 100, retryMaxMs: 300, pollMs: 50 } });
  const agents = new Map<string, SimulatedAgent>();
  for (const name of names) {
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, autoDone: true, labels: { 'node-role.kubernetes.io/worker': '' } });
    agents.set(name, agent);
    await agent.connect();
  }
  for (const agent of agents.values()) {
    await agent.waitFor(() => agent.status.state === 'Done' && agent.status.currentConfig !== '' && agent.status.currentConfig === agent.lastAssignment?.renderedConfig, 30_000);
  }
  return { standIn, server, agents, conn: ['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null'] };
}

const mcnWrites = (standIn: KubeApiStandIn) => standIn.requests.filter((r) => r.resource === 'machineconfignodes' && r.verb !== 'list' && r.verb !== 'watch');

test('with the CRD: a MachineConfigNode per node in the cluster, as mcctl get mcn shows it, deleted with its node', async () => {
  const { standIn, server, agents, conn } = await start(true, ['n1', 'n2']);
  try {
    const cluster = (name: string): Obj | undefined => standIn.get('MachineConfigNode', name) as Obj | undefined;
    const updated = (name: string): boolean => (cluster(name)?.status?.conditions ?? []).some((c: Obj) => c.type === 'Updated' && c.status === 'True');
    await eventually(() => updated('n1') && updated('n2'), 20_000, 'both MachineConfigNodes in the cluster, Updated');
    for (const name of ['n1', 'n2']) {
      const r = await runCliAsync([...conn, 'get', 'mcn', name, '-o', 'json']);
      assert.equal(r.status, 0, r.stderr);
      const served = JSON.parse(r.stdout) as Obj;
      const object = cluster(name)!;
      assert.equal(object.apiVersion, 'machineconfiguration.openshift.io/v1');
      assert.equal(object.kind, 'MachineConfigNode');
      assert.deepEqual(object.spec, served.spec, `${name}: the spec mcctl serves`);
      // observedGeneration is the cluster object's generation (the API server numbers its specs).
      assert.deepEqual({ ...object.status, observedGeneration: 0 }, { ...served.status, observedGeneration: 0 }, `${name}: the status mcctl serves`);
      assert.equal(object.status.observedGeneration, object.metadata.generation);
    }
    // Nothing changed: nothing more is written.
    const before = mcnWrites(standIn).length;
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(mcnWrites(standIn).length, before, 'an unchanged MachineConfigNode is not written again');

    // The node goes from mcplane: its MachineConfigNode goes from the cluster.
    agents.get('n2')!.close();
    const del = await runCliAsync([...conn, 'delete', 'node', 'n2']);
    assert.equal(del.status, 0, del.stderr);
    await eventually(() => cluster('n2') === undefined, 10_000, 'n2\'s MachineConfigNode deleted');
    assert.ok(cluster('n1'), 'n1\'s stays');
    assertCallsAllowed(standIn.requests);
  } finally {
    for (const a of agents.values()) a.close();
    await server.close();
    await standIn.close();
  }
});

test('without the CRD: nothing is written, and the log says so once', async () => {
  const { standIn, server, agents, conn } = await start(false, ['n1']);
  try {
    await eventually(() => server.logs.some((l) => l.includes('no MachineConfigNode CRD')), 10_000, 'the log line');
    // Status changes come and go: still one line, and not a request per change.
    agents.get('n1')!.report({ reason: 'a change' });
    agents.get('n1')!.report({ reason: '' });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(server.logs.filter((l) => l.includes('no MachineConfigNode CRD')).length, 1);
    assert.deepEqual(mcnWrites(standIn), []);
    assert.equal(standIn.requests.filter((r) => r.resource === 'machineconfignodes').length, 1, 'asked once');
    // mcctl still serves it.
    const r = await runCliAsync([...conn, 'get', 'mcn', 'n1', '-o', 'json']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).kind, 'MachineConfigNode');
    assertCallsAllowed(standIn.requests);
  } finally {
    for (const a of agents.values()) a.close();
    await server.close();
    await standIn.close();
  }
});
