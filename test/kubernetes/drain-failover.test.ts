// The leader killed (SIGKILL) in the middle of a drain: two real mcplane-server processes with
// --kubeconfig on a real etcd, the Kubernetes API stand-in, simulated agents. The drain is
// stored (NodeDrain) and the config held in the node's assignment, so the new leader resumes
// the drain where it stood and the node never gets its config undrained.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startEtcdCluster, type EtcdCluster } from '../../sandbox/etcd-cluster.ts';
import { startKubeApiStandIn, type KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { call } from '../../src/cli/client/call.ts';
import { addNode, addPod, evictablePodsOn, type KubeObjectLike } from '../helpers/kube-workloads.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { startReplicaSet, type ReplicaSet } from '../helpers/replica-set.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { testPki } from '../helpers/test-pki.ts';
import { assertCallsAllowed } from './rbac.ts';
import { silenceIpServernameWarning } from '../../src/runtime/process-warnings.ts';

silenceIpServernameWarning();

let etcd: EtcdCluster | undefined;
let set: ReplicaSet | undefined;
let standIn: KubeApiStandIn | undefined;
const agents: SimulatedAgent[] = [];

before(async () => {
  standIn = await startKubeApiStandIn({ timeScale: 0.01 });
  etcd = await startEtcdCluster({ members: 1 });
});
after(async () => {
  for (const a of agents) a.close();
  await set?.stop();
  await etcd?.stop();
  await standIn?.close();
});

const fileConfig = (text: string) => ({ source: 'a.yaml', text: mcYaml('50-a', 'worker', `  config:\n    ignition: {version: 3.2.0}\n    storage:\n      files:\n      - {path: /etc/a.conf, mode: 420, contents: {source: "data:,${text}"}}\n`) });

test('leader killed mid-drain: the new leader resumes the drain and releases the node only once it is drained', async () => {
  const s = standIn!;
  for (const [i, n] of ['w0', 'w1'].entries()) addNode(s, n, { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': `zone-${i}` });
  addPod(s, { namespace: 'shop', name: 'web-a', node: 'w0', labels: { app: 'web' } });
  addPod(s, { namespace: 'shop', name: 'web-b', node: 'w1', labels: { app: 'web' } });
  s.add({ apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', metadata: { name: 'web-pdb', namespace: 'shop' }, spec: { minAvailable: 2, selector: { matchLabels: { app: 'web' } } } } as never);
  const kubeconfig = s.writeKubeconfig(mkdtempSync(join(tmpdir(), 'drain-failover-')));
  const pki = await testPki();
  set = await startReplicaSet({ endpoints: etcd!.endpoints, count: 2, pkiDir: pki.dir, args: ['--kubeconfig', kubeconfig] });
  assert.equal(await set.waitForLeader(15_000), 0);
  const c = set.admin(1);
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 1\n') }, fileConfig('one')], dryRun: false }, 'apply');
  const first = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
  // The agents stay on replica-1, which survives.
  for (const name of ['w0', 'w1']) {
    const a = new SimulatedAgent({ address: set.addresses[1]!, failover: [set.addresses[0]!], tls: await pki.node(name), name, autoDone: true, doneAfterMs: 100, currentConfig: first });
    await a.connect();
    agents.push(a);
  }
  const w0 = agents[0]!;
  const receipts: { config: string; pods: string[] }[] = [];
  const push = w0.assignments.push.bind(w0.assignments);
  w0.assignments.push = (...items) => {
    for (const i of items) receipts.push({ config: i.renderedConfig, pods: evictablePodsOn(s, 'w0').map((p) => p.metadata.name) });
    return push(...items);
  };

  await call(c, c.config.apply.bind(c.config), { manifests: [fileConfig('two')], dryRun: false }, 'apply');
  const second = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
  await eventually(async () => (await call(c, c.status.getNode.bind(c.status), { name: 'w0' }, 'get node')).status!.reason.includes('web-pdb'), 20_000, 'the drain blocked by the budget');
  const cordoned = () => (s.get('Node', 'w0') as unknown as KubeObjectLike).spec?.unschedulable === true;
  assert.ok(cordoned());

  const refusedBefore = s.requests.filter((r) => r.subresource === 'eviction' && r.code === 429).length;
  await set.kill(0);
  assert.equal(await set.waitForLeader(20_000, 0), 1);
  // The new leader goes on evicting (refused again: the budget still holds) and keeps the node cordoned.
  await eventually(() => s.requests.filter((r) => r.subresource === 'eviction' && r.code === 429).length > refusedBefore, 20_000, 'the new leader retries the eviction');
  assert.ok(cordoned(), 'still cordoned under the new leader');
  assert.ok(!w0.assignments.some((a) => a.renderedConfig === second), 'not released undrained');
  const reason = (await call(c, c.status.getNode.bind(c.status), { name: 'w0' }, 'get node')).status!.reason;
  assert.match(reason, /eviction of pod shop\/web-a refused by PodDisruptionBudget shop\/web-pdb \(it allows 0 disruptions now\)/);

  // The budget frees: a third replica is ready on w1. The drain completes on the new leader.
  addPod(s, { namespace: 'shop', name: 'web-c', node: 'w1', labels: { app: 'web' } });
  await w0.waitFor(() => w0.status.currentConfig === second, 30_000);
  await eventually(() => !cordoned(), 15_000, 'w0 uncordoned');
  const receipt = receipts.find((r) => r.config === second);
  assert.deepEqual(receipt?.pods, [], 'the agent got its config only once the node was drained');
  assertCallsAllowed(s.requests);
});
