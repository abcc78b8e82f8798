// Drain by the leader, end to end: a real control plane with Kubernetes access to the API
// stand-in (real @kubernetes/client-node), simulated agents speaking the real gRPC protocol, and
// a workload behind a PodDisruptionBudget that allows one disruption at a time.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { KubeApiStandIn, StandInRequest } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { ManualClock } from '../../src/controlplane/replica/clock.ts';
import type { DrainEvent } from '../../src/controlplane/controllers/drain-controller.ts';
import { kubeStandInPerTest } from '../helpers/kube-stand-in-fixture.ts';
import { addBudget, addNode, addPod, evictablePodsOn, Workload, type KubeObjectLike } from '../helpers/kube-workloads.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { assertCallsAllowed } from './rbac.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';

const FAST_DRAIN = { retryBaseMs: 150, retryMaxMs: 600, pollMs: 50 };
const ANNOTATION = (k: string) => `machineconfiguration.openshift.io/${k}`;

let workloads: Workload[] = [];
const { standIn, server, agents, startStandIn, startServer, connectAgent } = kubeStandInPerTest({
  beforeClose: (started) => {
    for (const w of workloads.splice(0)) w.stop();
    // Whatever the test did, mcplane stayed within packaging/kubernetes/rbac.yaml.
    const calls = started ? assertCallsAllowed(started.requests) : 0;
    assert.ok(calls > 0 || !started, 'mcplane called the cluster');
  },
});

/** Each request the stand-in answers, with the time it arrived (its log has no clock). */
function timeRequests(s: KubeApiStandIn): (StandInRequest & { at: number })[] {
  const timed = s.requests as (StandInRequest & { at: number })[];
  const push = timed.push.bind(timed);
  timed.push = (...items) => push(...items.map((i) => Object.assign(i, { at: Date.now() })));
  return timed;
}

const fileConfig = (text: string) => ({ source: 'a.yaml', text: mcYaml('50-a', 'worker', `  config:\n    ignition: {version: 3.2.0}\n    storage:\n      files:\n      - {path: /etc/a.conf, mode: 420, contents: {source: "data:,${text}"}}\n`) });

async function target(c: Clients, pool = 'worker'): Promise<string> {
  return (await call(c, c.status.getPool.bind(c.status), { name: pool }, 'get pool')).status!.configuration;
}
async function nodeOf(c: Clients, name: string) {
  return call(c, c.status.getNode.bind(c.status), { name }, 'get node');
}
const kubeNode = (name: string) => standIn.get('Node', name) as unknown as KubeObjectLike;

/** Worker Nodes for `names`; with `zones`, each in its own, zone-0 first: the order the rollout takes them. */
function addWorkers(names: string[], options: { zones?: boolean } = {}): void {
  names.forEach((n, i) => addNode(standIn, n, { 'node-role.kubernetes.io/worker': '', ...(options.zones ? { 'topology.kubernetes.io/zone': `zone-${i}` } : {}) }));
}

/**
 * The stand-in the held-drain tests start from: workers w0 and w1 in zones 0 and 1, pod
 * shop/web-a on w0, and budget shop/web-pdb over app=web keeping `minAvailable`, so w0's drain
 * is refused while the budget stands. Returns the node names.
 */
async function standInWithHeldWeb(minAvailable: number): Promise<string[]> {
  await startStandIn();
  const names = ['w0', 'w1'];
  addWorkers(names, { zones: true });
  addPod(standIn, { namespace: 'shop', name: 'web-a', node: 'w0', labels: { app: 'web' } });
  addBudget(standIn, 'shop', 'web-pdb', 'web', { minAvailable });
  return names;
}

async function startAgents(names: string[], current: string, doneAfterMs: number): Promise<SimulatedAgent[]> {
  const out: SimulatedAgent[] = [];
  for (const name of names) out.push(await connectAgent(name, { autoDone: true, doneAfterMs, currentConfig: current }));
  return out;
}

const apply = (c: Clients, ...manifests: { source: string; text: string }[]) => call(c, c.config.apply.bind(c.config), { manifests, dryRun: false }, 'apply');

/**
 * The rollout most tests here watch: `pool` and fileConfig('one') applied, agents for `names` on
 * that first config (each Done `doneAfterMs` after an assignment), then fileConfig('two') applied.
 */
async function rollOutSecond(c: Clients, pool: { source: string; text: string }, names: string[], doneAfterMs: number): Promise<{ first: string; second: string; fleet: SimulatedAgent[] }> {
  await apply(c, pool, fileConfig('one'));
  const first = await target(c);
  const fleet = await startAgents(names, first, doneAfterMs);
  await apply(c, fileConfig('two'));
  return { first, second: await target(c), fleet };
}

test('a rollout with reboots drains each node first: the PDB blocks, the reason names the pod and the budget, the budget frees, every node is uncordoned', async () => {
  await startStandIn();
  const requests = timeRequests(standIn);
  const names = ['w0', 'w1', 'w2'];
  addWorkers(names, { zones: true });
  for (const n of names) {
    addPod(standIn, { namespace: 'kube-system', name: `ds-${n}`, node: n, daemonSet: true });
    addPod(standIn, { namespace: 'kube-system', name: `static-${n}`, node: n, mirror: true });
  }
  // Four web replicas, two on w0 (the first to update: zone-0); the budget allows one down.
  addPod(standIn, { namespace: 'shop', name: 'web-a', node: 'w0', labels: { app: 'web' } });
  addPod(standIn, { namespace: 'shop', name: 'web-b', node: 'w0', labels: { app: 'web' } });
  addPod(standIn, { namespace: 'shop', name: 'web-c', node: 'w1', labels: { app: 'web' } });
  addPod(standIn, { namespace: 'shop', name: 'web-d', node: 'w2', labels: { app: 'web' } });
  addPod(standIn, { namespace: 'shop', name: 'cache', node: 'w0', emptyDir: true, graceSeconds: 60 });
  addBudget(standIn, 'shop', 'web-pdb', 'web', { maxUnavailable: 1 });
  const web = new Workload(standIn, 'shop', 'web', 4, names);
  web.readyAllowed = false;
  workloads.push(web);

  await startServer({ drain: FAST_DRAIN });
  const drainEvents: DrainEvent[] = [];
  server.handle.controlPlane.drains.onEvent = (e) => drainEvents.push(e);
  const c = server.admin();
  await apply(c, { source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 1\n') }, fileConfig('one'));
  const first = await target(c);
  const fleet = await startAgents(names, first, 150);
  // What was on each node when its agent received each config.
  const atReceipt: { node: string; config: string; pods: string[]; at: number }[] = [];
  for (const a of fleet) {
    const push = a.assignments.push.bind(a.assignments);
    a.assignments.push = (...items) => {
      for (const i of items) atReceipt.push({ node: a.options.name, config: i.renderedConfig, pods: evictablePodsOn(standIn, a.options.name).map((p) => p.metadata.name), at: Date.now() });
      return push(...items);
    };
  }
  // MCO's annotations appear on every Node and say Done on the first config.
  await eventually(() => names.every((n) => kubeNode(n).metadata.annotations?.[ANNOTATION('state')] === 'Done' && kubeNode(n).metadata.annotations?.[ANNOTATION('currentConfig')] === first), 10_000, 'annotations on the first config');

  await apply(c, fileConfig('two'));
  const second = await target(c);
  assert.notEqual(second, first);

  // w0 goes first (zone-0). One web pod is evicted, the other is refused by the budget.
  let reason = '';
  await eventually(async () => {
    reason = (await nodeOf(c, 'w0')).status!.reason;
    return reason.includes('PodDisruptionBudget');
  }, 15_000, 'the drain reason naming the budget');
  assert.match(reason, /^draining: eviction of pod shop\/web-[ab] refused by PodDisruptionBudget shop\/web-pdb \(it allows 0 disruptions now\); attempt \d+; next retry at \d{4}-\d\d-\d\dT[\d:.]+Z \(in \d+(ms|s)\); 3 pods left \(shop\/cache, shop\/web-a, shop\/web-b\)$/);
  const w0 = await nodeOf(c, 'w0');
  assert.equal(w0.status!.state, 'Working');
  assert.equal(w0.status!.phase, 'drain');
  assert.equal(w0.status!.desiredConfig, second, 'the leader decided it');
  assert.equal(kubeNode('w0').spec?.unschedulable, true, 'cordoned');
  assert.ok(!fleet[0]!.assignments.some((a) => a.renderedConfig === second), 'the agent has not received the new config');
  await eventually(() => (kubeNode('w0').metadata.annotations?.[ANNOTATION('reason')] ?? '').includes('shop/web-pdb'), 5000, 'the reason annotation');
  assert.equal(kubeNode('w0').metadata.annotations?.[ANNOTATION('state')], 'Working');
  assert.equal(kubeNode('w0').metadata.annotations?.[ANNOTATION('desiredConfig')], second);
  // Several refusals while blocked: retried with backoff, not once and given up.
  await eventually(() => requests.filter((r) => r.subresource === 'eviction' && r.code === 429).length >= 2, 5000, 'a retried eviction');

  // The evicted replica becomes ready elsewhere: the budget frees and the rollout goes on.
  web.readyAllowed = true;
  await eventually(async () => {
    const nodes = await Promise.all(names.map((n) => nodeOf(c, n)));
    return nodes.every((n) => n.status!.currentConfig === second && n.status!.state === 'Done') && names.every((n) => kubeNode(n).spec?.unschedulable !== true);
  }, 40_000, 'every node updated and uncordoned');

  // Every agent got the new config only when its node held no pod a drain must remove, and
  // after every accepted eviction of a pod on its node (the stand-in's eviction log).
  const nodeOfPod = new Map<string, string>([['web-a', 'w0'], ['web-b', 'w0'], ['cache', 'w0'], ['web-c', 'w1'], ['web-d', 'w2'], ...web.replacements.map((r): [string, string] => [r.name, r.node])]);
  for (const n of names) {
    const receipt = atReceipt.find((r) => r.node === n && r.config === second);
    const received = fleet[names.indexOf(n)]!.assignments.find((a) => a.renderedConfig === second);
    assert.ok(receipt && received, `${n} received ${second}`);
    assert.deepEqual(receipt.pods, [], `${n} was drained when its agent received the config`);
    const evictionsOnNode = requests.filter((r) => r.subresource === 'eviction' && r.code === 201 && nodeOfPod.get(r.name!) === n);
    assert.ok(evictionsOnNode.length > 0, `pods were evicted from ${n}`);
    for (const e of evictionsOnNode) assert.ok(e.at < received.receivedAt, `${n}: ${e.name} evicted at ${e.at}, config received at ${received.receivedAt}`);
  }
  const evicted = requests.filter((r) => r.subresource === 'eviction').map((r) => r.name!);
  assert.ok(evicted.includes('cache'), 'a pod with emptyDir is evicted');
  assert.ok(!evicted.some((p) => p.startsWith('ds-') || p.startsWith('static-')), `DaemonSet and mirror pods are left alone: ${evicted.join(', ')}`);
  assert.ok(standIn.list('Pod', 'kube-system').length === 6, 'DaemonSet and mirror pods still run');
  // Each drain came after the previous node was back (maxUnavailable 1).
  const cordons = requests.filter((r) => r.verb === 'patch' && r.resource === 'nodes').map((r) => r.name);
  assert.ok(cordons.includes('w1') && cordons.includes('w2'));
  // MCO's annotations follow: Done on the new config everywhere.
  await eventually(() => names.every((n) => {
    const a = kubeNode(n).metadata.annotations ?? {};
    return a[ANNOTATION('currentConfig')] === second && a[ANNOTATION('desiredConfig')] === second && a[ANNOTATION('state')] === 'Done' && a[ANNOTATION('reason')] === '';
  }), 5000, 'annotations on the new config');
  const pool = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool');
  assert.equal(pool.status!.conditions.find((x) => x.type === 'NodeDrainStalled')?.status, 'False');
  // Kubernetes Events on the Node, as `kubectl describe node w0` lists them; a repeated refusal
  // is one Event with a count.
  type Event = { involvedObject: { kind: string; name: string }; reason: string; type: string; message: string; count: number };
  const eventsOf = (n: string) => (standIn.list('Event', 'default') as unknown as Event[]).filter((e) => e.involvedObject.kind === 'Node' && e.involvedObject.name === n);
  await eventually(() => eventsOf('w0').some((e) => e.reason === 'Uncordon'), 5000, 'the Uncordon event');
  assert.deepEqual(eventsOf('w0').map((e) => e.reason), ['Cordon', 'DrainBlocked', 'Drained', 'Uncordon']);
  const blocked = eventsOf('w0').find((e) => e.reason === 'DrainBlocked')!;
  assert.equal(blocked.type, 'Warning');
  assert.ok(blocked.count >= 2, `one Event counted ${blocked.count} times`);
  // The same steps reach the seam for mcplane's own events, metrics and history, with durations.
  for (const n of names) {
    const drained = drainEvents.find((e) => e.node === n && e.reason === 'Drained');
    assert.ok(drained && drained.seconds! > 0, `${n}: Drained with its duration`);
  }
  assert.deepEqual(drainEvents.filter((e) => e.node === 'w0').map((e) => e.reason).filter((r, i, a) => a.indexOf(r) === i), ['Cordon', 'DrainBlocked', 'Drained', 'Uncordon']);
  assert.match(blocked.message, /^eviction of pod shop\/web-[ab] refused by PodDisruptionBudget shop\/web-pdb: Cannot evict pod as it would violate the pod's disruption budget\.$/);
  assert.ok(server.logs.some((l) => l.includes('eviction refused by a disruption budget; retrying')));
});

test('a host with no Kubernetes Node, and a single-node cluster, are updated without a drain and say so', async () => {
  await startStandIn();
  const requests = timeRequests(standIn);
  addNode(standIn, 'solo', { 'node-role.kubernetes.io/worker': '' });
  addPod(standIn, { namespace: 'shop', name: 'web', node: 'solo' });
  await startServer({ drain: FAST_DRAIN });
  const c = server.admin();
  const { second, fleet: [solo, ghost] } = await rollOutSecond(c, { source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 2\n') }, ['solo', 'ghost'], 1500);
  await solo!.waitFor(() => solo!.lastAssignment?.renderedConfig === second);
  await ghost!.waitFor(() => ghost!.lastAssignment?.renderedConfig === second);
  await eventually(async () => (await nodeOf(c, 'solo')).status!.reason.includes('single-node'), 5000, 'solo reason');
  assert.match((await nodeOf(c, 'solo')).status!.reason, /not drained: a single-node cluster has nowhere to move its pods/);
  await eventually(async () => (await nodeOf(c, 'ghost')).status!.reason.includes('no Node'), 5000, 'ghost reason');
  assert.match((await nodeOf(c, 'ghost')).status!.reason, /not drained: the cluster has no Node named ghost/);
  assert.equal(requests.filter((r) => r.subresource === 'eviction').length, 0, 'nothing evicted');
  assert.notEqual(kubeNode('solo').spec?.unschedulable, true, 'never cordoned');
  // Once Done, the note is gone: it belongs to the update in progress.
  await eventually(async () => (await nodeOf(c, 'ghost')).status!.currentConfig === second, 5000, 'ghost done');
  assert.equal((await nodeOf(c, 'ghost')).status!.reason, '');
});

test('uncordoning a node during its drain is undone and said; past its timeout the pool can mark it Degraded; NodeDrainStalled names it', async () => {
  // minAvailable 2 of 2: no disruption allowed until a third replica is ready.
  const names = await standInWithHeldWeb(2);
  addPod(standIn, { namespace: 'shop', name: 'web-b', node: 'w1', labels: { app: 'web' } });
  const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
  await startServer({ drain: FAST_DRAIN, clock });
  const c = server.admin();
  const pool = (onTimeout: string) => ({ source: 'pool.yaml', text: poolYaml('worker', `  maxUnavailable: 1\n  drain: {timeoutSeconds: 120, onTimeout: ${onTimeout}, stalledAfterSeconds: 60}\n`) });
  const { second, fleet: [w0] } = await rollOutSecond(c, pool('Degrade'), names, 100);
  await eventually(async () => (await nodeOf(c, 'w0')).status!.reason.includes('web-pdb'), 10_000, 'blocked by the budget');
  assert.equal(kubeNode('w0').spec?.unschedulable, true);

  // Someone uncordons it (kubectl uncordon is this patch).
  const node = kubeNode('w0');
  standIn.put({ apiVersion: 'v1', kind: 'Node', ...node, spec: { ...node.spec, unschedulable: false } } as never);
  await eventually(() => kubeNode('w0').spec?.unschedulable === true, 5000, 'cordoned again');
  await eventually(async () => (await nodeOf(c, 'w0')).status!.reason.includes('cordoned again'), 5000, 'the reason says so');
  assert.match((await nodeOf(c, 'w0')).status!.reason, /uncordoned by someone during the drain, cordoned again \(1×\)/);
  assert.ok(server.logs.some((l) => l.includes('node was uncordoned during its update; cordoning it again')));
  await eventually(() => (standIn.list('Event', 'default') as unknown as { reason: string; type: string; involvedObject: { name: string } }[])
    .some((e) => e.reason === 'Recordoned' && e.type === 'Warning' && e.involvedObject.name === 'w0'), 5000, 'a Recordoned event on the Node');

  // Past stalledAfterSeconds: the pool's NodeDrainStalled names the node.
  const condition = async (type: string) => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.conditions.find((x) => x.type === type);
  assert.equal((await condition('NodeDrainStalled'))?.status, 'False');
  clock.advance(61_000);
  server.handle.controlPlane.resync();
  await eventually(async () => (await condition('NodeDrainStalled'))?.status === 'True', 5000, 'NodeDrainStalled');
  assert.match((await condition('NodeDrainStalled'))!.message, /1 node has been draining for longer than 1m: w0 \(since 2026-01-01T00:00:00\.000Z: draining: eviction of pod shop\/web-a refused by PodDisruptionBudget shop\/web-pdb/);
  const described = await runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', 'describe', 'mcp', 'worker']);
  assert.match(described.stdout, /\nDrain: +after 2m the node is marked Degraded; NodeDrainStalled after 1m\n/);
  assert.match(described.stdout, /NodeDrainStalled +True +DrainStalled/);
  assert.equal((await nodeOf(c, 'w0')).status!.state, 'Working', 'not Degraded before the timeout');

  // Past timeoutSeconds with onTimeout Degrade: the node is Degraded with the reason, and so the pool.
  clock.advance(60_000);
  server.handle.controlPlane.resync();
  await eventually(async () => (await nodeOf(c, 'w0')).status!.state === 'Degraded', 5000, 'Degraded');
  assert.match((await nodeOf(c, 'w0')).status!.reason, /drain exceeded pool worker's timeout of 2m \(onTimeout: Degrade\)/);
  await eventually(async () => (await condition('NodeDegraded'))?.status === 'True', 5000, 'pool NodeDegraded');
  await eventually(() => kubeNode('w0').metadata.annotations?.[ANNOTATION('state')] === 'Degraded', 5000, 'state annotation Degraded');
  assert.ok(!w0!.assignments.some((a) => a.renderedConfig === second), 'still held');

  // With onTimeout Wait the node goes back to Working: MCO's behaviour, and the reason says so.
  await apply(c, pool('Wait'));
  await eventually(async () => (await nodeOf(c, 'w0')).status!.state === 'Working', 5000, 'Working again');
  assert.match((await nodeOf(c, 'w0')).status!.reason, /drain exceeded pool worker's timeout of 2m, still waiting \(onTimeout: Wait\)/);

  // The budget frees (a third replica is ready elsewhere): the drain completes by itself.
  addPod(standIn, { namespace: 'shop', name: 'web-c', node: 'w1', labels: { app: 'web' } });
  await w0!.waitFor(() => w0!.status.currentConfig === second, 10_000);
  await eventually(() => kubeNode('w0').spec?.unschedulable !== true, 5000, 'uncordoned');
  await eventually(async () => (await condition('NodeDrainStalled'))?.status === 'False', 5000, 'no drain stalled any more');
});

test('with Kubernetes access, a node\'s labels and age come from its Node object: the cluster\'s labels decide its pool', async () => {
  await startStandIn();
  const created = new Date('2025-03-04T05:06:07Z');
  addNode(standIn, 'n1', { 'node-role.kubernetes.io/infra': '', 'topology.kubernetes.io/zone': 'zone-k' }, created);
  addNode(standIn, 'n2', { 'node-role.kubernetes.io/worker': '' });
  await startServer({ drain: FAST_DRAIN });
  const c = server.admin();
  await apply(c, { source: 'infra.yaml', text: poolYaml('infra') });
  // The agent says worker, zone-a: the cluster says infra, zone-k.
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('n1'), name: 'n1', labels: { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': 'zone-a' } });
  agents.push(agent);
  await agent.connect();
  await eventually(async () => (await nodeOf(c, 'n1')).pool === 'infra', 5000, 'infra from the cluster\'s labels');
  const n1 = await nodeOf(c, 'n1');
  assert.equal(n1.labels['topology.kubernetes.io/zone'], 'zone-k');
  assert.equal(n1.labels['node-role.kubernetes.io/worker'], undefined);
  assert.equal(Number(n1.registrationTimeUnixMs), created.getTime(), 'registered when the cluster created the Node');

  // mcctl label node is refused: the labels are the cluster's.
  await assert.rejects(call(c, c.config.labelNode.bind(c.config), { name: 'n1', set: { a: 'b' }, remove: [] }, 'label'), /labels come from the cluster; use kubectl label node n1/);

  // The watch follows the cluster, across a compaction (410 Gone, then a relist): relabel the Node.
  // The change lands while mcplane's watch is down and its history is compacted before the watch
  // resumes (all in this one tick, so it cannot resume in between): the resume gets 410 Gone and
  // mcplane must list again.
  standIn.closeWatches();
  const node = kubeNode('n1');
  const labels = { ...node.metadata.labels };
  delete labels['node-role.kubernetes.io/infra'];
  standIn.put({ apiVersion: 'v1', kind: 'Node', ...node, metadata: { ...node.metadata, labels: { ...labels, 'node-role.kubernetes.io/worker': '' } } } as never);
  standIn.compact();
  await eventually(async () => (await nodeOf(c, 'n1')).pool === 'worker', 10_000, 'worker after the cluster relabelled it');
  // The relabel may reach mcplane before the relist does: the leader's own patch of MCO's
  // annotations returns the Node as it is now. The relist after the 410 comes all the same.
  await eventually(() => server.logs.some((l) => l.includes('"resource":"nodes"') && l.includes('watch expired (410 Gone); listing again')), 5000, 'relisted after 410');
  // And the annotations follow the node into its new pool.
  const workerTarget = await target(c);
  await eventually(() => kubeNode('n1').metadata.annotations?.[ANNOTATION('desiredConfig')] === workerTarget, 5000, 'desiredConfig annotation');
  // A Node deleted from the cluster: the host keeps its own labels again.
  standIn.remove('Node', 'n1');
  await eventually(async () => (await nodeOf(c, 'n1')).labels['topology.kubernetes.io/zone'] === 'zone-a', 5000, 'the agent\'s labels again');
});

test('an eviction the API server fails (two budgets cover the pod) is retried, and the reason carries the server\'s message', async () => {
  await startStandIn();
  addWorkers(['w0', 'w1']);
  addPod(standIn, { namespace: 'shop', name: 'web', node: 'w0', labels: { app: 'web' } });
  for (const name of ['pdb-1', 'pdb-2']) {
    addBudget(standIn, 'shop', name, 'web', { maxUnavailable: 1 });
  }
  await startServer({ drain: FAST_DRAIN });
  const c = server.admin();
  const { second, fleet: [w0] } = await rollOutSecond(c, { source: 'pool.yaml', text: poolYaml('worker') }, ['w0', 'w1'], 50);
  await eventually(async () => (await nodeOf(c, 'w0')).status!.reason.includes('eviction failed'), 10_000, 'the failure in the reason');
  assert.match((await nodeOf(c, 'w0')).status!.reason, /^draining: eviction failed for shop\/web: HTTP 500: .*more than one PodDisruptionBudget.*; attempt \d+; next retry at /);
  assert.ok(!w0!.assignments.some((a) => a.renderedConfig === second), 'held');
  standIn.remove('PodDisruptionBudget', 'pdb-2', 'shop');
  await w0!.waitFor(() => w0!.status.currentConfig === second, 10_000);
});

test('a Node someone cordoned before its drain is left cordoned after the update', async () => {
  await startStandIn();
  addWorkers(['w0', 'w1']);
  const w0node = kubeNode('w0');
  standIn.put({ apiVersion: 'v1', kind: 'Node', ...w0node, spec: { unschedulable: true } } as never);
  addPod(standIn, { namespace: 'shop', name: 'web', node: 'w0' });
  await startServer({ drain: FAST_DRAIN });
  const c = server.admin();
  const { second, fleet: [w0, w1] } = await rollOutSecond(c, { source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 2\n') }, ['w0', 'w1'], 50);
  for (const a of [w0!, w1!]) await a.waitFor(() => a.status.currentConfig === second, 10_000);
  await eventually(() => server.logs.some((l) => l.includes('left cordoned as it was before the drain')) && server.logs.some((l) => l.includes('"node":"w1"') && l.includes('node updated and uncordoned')), 5000, 'both drains over');
  assert.equal(kubeNode('w0').spec?.unschedulable, true, 'still cordoned, as its operator left it');
  assert.notEqual(kubeNode('w1').spec?.unschedulable, true);
  assert.equal(standIn.list('Pod', 'shop').length, 0, 'its pod was evicted all the same');
});

test('a host deleted from mcplane in the middle of its drain leaves its Node uncordoned', async () => {
  await startStandIn();
  addWorkers(['w0', 'w1']);
  addPod(standIn, { namespace: 'shop', name: 'web', node: 'w0', labels: { app: 'web' } });
  addBudget(standIn, 'shop', 'web-pdb', 'web', { minAvailable: 1 });
  await startServer({ drain: FAST_DRAIN });
  const c = server.admin();
  const { fleet: [w0] } = await rollOutSecond(c, { source: 'pool.yaml', text: poolYaml('worker') }, ['w0', 'w1'], 50);
  await eventually(async () => (await nodeOf(c, 'w0')).status!.reason.includes('web-pdb'), 10_000, 'blocked');
  assert.equal(kubeNode('w0').spec?.unschedulable, true);
  w0!.close();
  await eventually(async () => !(await nodeOf(c, 'w0')).status!.connected, 5000, 'disconnected');
  await call(c, c.config.delete.bind(c.config), { kind: 'Node', name: 'w0' }, 'delete node');
  await eventually(() => kubeNode('w0').spec?.unschedulable === false, 5000, 'uncordoned');
  await eventually(() => server.logs.some((l) => l.includes('"node":"w0"') && l.includes('drain abandoned')), 5000, 'the log says so');
  await eventually(() => !server.handle.controlPlane.cache.drains.has('w0'), 5000, 'the drain record gone');
});

test('a change the disruption policy covers without a reboot is not drained; a Drain action is', async () => {
  await startStandIn();
  const requests = timeRequests(standIn);
  addWorkers(['w0', 'w1']);
  addPod(standIn, { namespace: 'shop', name: 'web', node: 'w0' });
  await startServer({ drain: FAST_DRAIN });
  const c = server.admin();
  const pool = (action: string) => ({ source: 'pool.yaml', text: poolYaml('worker', `  maxUnavailable: 2\n  disruptionPolicy:\n    files:\n    - {path: /etc/a.conf, actions: [${action}]}\n`) });
  const { second, fleet: [w0] } = await rollOutSecond(c, pool('{type: restart, unit: chronyd.service}'), ['w0', 'w1'], 50);
  await w0!.waitFor(() => w0!.status.currentConfig === second, 10_000);
  assert.equal(requests.filter((r) => r.subresource === 'eviction').length, 0, 'no eviction');
  assert.ok(!server.logs.some((l) => l.includes('drain started')), 'no drain, so never cordoned');
  assert.notEqual(kubeNode('w0').spec?.unschedulable, true);
  assert.equal(standIn.list('Pod', 'shop').length, 1);

  // MCO's Drain action: no reboot, but the node is drained first.
  await apply(c, pool('{type: Drain}'), fileConfig('three'));
  const third = await target(c);
  await w0!.waitFor(() => w0!.status.currentConfig === third, 10_000);
  assert.deepEqual(requests.filter((r) => r.subresource === 'eviction' && r.code === 201).map((r) => r.name), ['web'], 'drained for the Drain action');
  await eventually(() => kubeNode('w0').spec?.unschedulable === false, 5000, 'uncordoned');
});

test('a drain that outlasts its maintenance window holds the reboot, drained and cordoned, until the next window opens', async () => {
  // minAvailable 1 of 1: the eviction is refused until the budget goes.
  const names = await standInWithHeldWeb(1);
  // 02:30 UTC, inside the nightly 02:00-03:00 window.
  const clock = new ManualClock(Date.parse('2026-01-01T02:30:00Z'));
  await startServer({ drain: FAST_DRAIN, clock });
  const c = server.admin();
  const pool = { source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 1\n  maintenanceWindows: [{schedule: "0 2 * * *", duration: 1h, timeZone: UTC}]\n') };
  const { second, fleet: [w0] } = await rollOutSecond(c, pool, names, 100);
  await eventually(async () => (await nodeOf(c, 'w0')).status!.reason.includes('web-pdb'), 10_000, 'blocked by the budget');

  // The window closes while the budget holds the drain; then the budget goes.
  clock.set(Date.parse('2026-01-01T03:30:00Z'));
  standIn.remove('PodDisruptionBudget', 'web-pdb', 'shop');
  server.handle.controlPlane.resync();
  await eventually(async () => (await nodeOf(c, 'w0')).status!.reason.includes('maintenance window closed'), 10_000, 'the reason says it waits for the window');
  assert.match((await nodeOf(c, 'w0')).status!.reason, /^drained; the maintenance window closed during the drain: rendered-worker-\S+ is released when the next opens \(2026-01-02T02:00:00\.000Z, in 22h\)$/);
  assert.deepEqual(evictablePodsOn(standIn, 'w0'), [], 'drained');
  assert.equal(kubeNode('w0').spec?.unschedulable, true, 'still cordoned');
  await new Promise((r) => setTimeout(r, 300));
  assert.ok(!w0!.assignments.some((a) => a.renderedConfig === second), 'the agent has not received the config outside the window');

  // The next window opens: the config goes, and the node is uncordoned once Done.
  clock.set(Date.parse('2026-01-02T02:01:00Z'));
  server.handle.controlPlane.resync();
  await w0!.waitFor(() => w0!.assignments.some((a) => a.renderedConfig === second), 10_000);
  await eventually(async () => (await nodeOf(c, 'w0')).status!.currentConfig === second && kubeNode('w0').spec?.unschedulable !== true, 10_000, 'updated and uncordoned');
});

test('a leader without Kubernetes access never releases a held config undrained: it waits, and says why', async () => {
  const names = await standInWithHeldWeb(1);
  const dataDir = mkdtempSync(join(tmpdir(), 'drain-data-'));
  await startServer({ dataDir, drain: FAST_DRAIN });
  let c = server.admin();
  const { second, fleet: [w0] } = await rollOutSecond(c, { source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 1\n') }, names, 100);
  await eventually(async () => (await nodeOf(c, 'w0')).status!.reason.includes('web-pdb'), 10_000, 'blocked by the budget');

  // The same store, served by a replica started without --kubeconfig.
  await startServer({ dataDir, drain: FAST_DRAIN, kubernetes: false });
  c = server.admin();
  for (const a of agents) await a.connect(server.address);
  await eventually(async () => (await nodeOf(c, 'w0')).status!.reason.includes('no Kubernetes access'), 10_000, 'the reason says why it waits');
  assert.match((await nodeOf(c, 'w0')).status!.reason, /held for a drain: the leader has no Kubernetes access \(--kubeconfig\); it waits for a leader that can drain the node/);
  await new Promise((r) => setTimeout(r, 500));
  assert.ok(!w0!.assignments.some((a) => a.renderedConfig === second), 'the undrained node never received the config');
  assert.equal(evictablePodsOn(standIn, 'w0').length, 1, 'its pod still runs there');
});

/** A pool whose file /etc/a.conf takes `action`, with maxUnavailable 1. */
const poolWithFilePolicy = (action: string) => ({ source: 'pool.yaml', text: poolYaml('worker', `  maxUnavailable: 1\n  disruptionPolicy:\n    files:\n    - {path: /etc/a.conf, actions: [${action}]}\n`) });

/**
 * Against the stand-in the test has filled (Nodes w0 and w1): a server, a change the pool's
 * policy covers with a restart, sent to w0 undrained, and w0 Degraded on it (its restart failed),
 * so it retries when its assignment comes again.
 */
async function degradedUnderRestartPolicy(): Promise<{ c: Clients; w0: SimulatedAgent; second: string }> {
  await startServer({ drain: FAST_DRAIN });
  const c = server.admin();
  await apply(c, poolWithFilePolicy('{type: restart, unit: chronyd.service}'), fileConfig('one'));
  const first = await target(c);
  const w0 = await connectAgent('w0', { autoDone: false, currentConfig: first });
  await startAgents(['w1'], first, 50);
  await apply(c, fileConfig('two'));
  const second = await target(c);
  await w0.waitFor(() => w0.lastAssignment?.renderedConfig === second, 10_000);
  w0.report({ desiredConfig: second, state: 'Degraded', phase: 'actions', reason: 'actions: restart chronyd.service: job ended "failed"' });
  await eventually(async () => (await nodeOf(c, 'w0')).status!.state === 'Degraded', 10_000, 'w0 Degraded');
  return { c, w0, second };
}

test('a policy change before a node finished its update is decided again: the reboot it now needs is drained first', async () => {
  await startStandIn();
  const requests = timeRequests(standIn);
  addWorkers(['w0', 'w1']);
  addPod(standIn, { namespace: 'shop', name: 'web', node: 'w0' });
  const { c, w0, second } = await degradedUnderRestartPolicy();
  assert.equal(requests.filter((r) => r.subresource === 'eviction').length, 0, 'no drain for a restart');

  // Now the file reboots. w0 retries when its assignment comes again: that must wait for a drain.
  const sent = w0.assignments.length;
  let podsAtReceipt: string[] | undefined;
  const push = w0.assignments.push.bind(w0.assignments);
  w0.assignments.push = (...items) => {
    podsAtReceipt ??= evictablePodsOn(standIn, 'w0').map((p) => p.metadata.name);
    return push(...items);
  };
  await apply(c, poolWithFilePolicy('{type: Reboot}'));
  await w0.waitFor(() => w0.assignments.length > sent, 10_000);
  assert.equal(w0.lastAssignment!.renderedConfig, second);
  assert.deepEqual(JSON.parse(w0.lastAssignment!.disruptionPolicyJson).files, [{ path: '/etc/a.conf', actions: [{ type: 'reboot' }] }]);
  assert.deepEqual(podsAtReceipt, [], 'the node was empty when the new policy reached it');
  assert.deepEqual(requests.filter((r) => r.subresource === 'eviction' && r.code === 201).map((r) => r.name), ['web']);
  assert.equal(kubeNode('w0').spec?.unschedulable, true, 'cordoned while it reboots');
  assert.ok(server.logs.some((l) => l.includes('decided again under the new one')));

  w0.report({ currentConfig: second, desiredConfig: second, state: 'Done', phase: 'done', reason: '' });
  await eventually(() => kubeNode('w0').spec?.unschedulable === false, 5000, 'uncordoned once Done');
});

test('a node that finishes its update while a re-decision has it draining needs no drain: the drain ends, nothing more is evicted, the node is uncordoned', async () => {
  await startStandIn();
  const requests = timeRequests(standIn);
  addWorkers(['w0', 'w1']);
  // The only pod on w0 is behind a budget that allows no disruption: the drain cannot finish.
  addPod(standIn, { namespace: 'shop', name: 'db', node: 'w0', labels: { app: 'db' } });
  addBudget(standIn, 'shop', 'db-pdb', 'db', { maxUnavailable: 0 });
  const { c, w0, second } = await degradedUnderRestartPolicy();

  // Under a reboot policy its retry must be drained: held, and the budget blocks the drain.
  await apply(c, poolWithFilePolicy('{type: Reboot}'));
  await eventually(async () => /PodDisruptionBudget shop\/db-pdb/.test((await nodeOf(c, 'w0')).status!.reason), 10_000, 'the drain blocked by the budget');
  assert.equal(kubeNode('w0').spec?.unschedulable, true);

  // Meanwhile the node finished by itself (its agent resumed the update it had, a restart).
  const sent = w0.assignments.length;
  w0.report({ currentConfig: second, desiredConfig: second, state: 'Done', phase: 'done', reason: '' });
  await eventually(() => kubeNode('w0').spec?.unschedulable === false, 5000, 'uncordoned');
  await eventually(() => !server.handle.controlPlane.cache.drains.has('w0'), 5000, 'the drain record gone');
  assert.equal(server.handle.controlPlane.cache.assignments.get('w0')!.value.holdForDrain, undefined, 'no hold left');
  assert.equal(standIn.list('Pod', 'shop').length, 1, 'the pod the budget protects was never evicted');
  assert.ok(server.logs.some((l) => l.includes('node finished its update during its drain; drain ended')));
  // The new policy reaches it once released, for its next update.
  await w0.waitFor(() => w0.assignments.length > sent, 5000);
  assert.deepEqual(JSON.parse(w0.lastAssignment!.disruptionPolicyJson).files, [{ path: '/etc/a.conf', actions: [{ type: 'reboot' }] }]);
  assert.ok(requests.every((r) => r.subresource !== 'eviction' || r.code !== 201), 'no eviction succeeded');
});
