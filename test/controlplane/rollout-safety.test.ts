// Per-group disruption budgets and maintenance windows over real gRPC with simulated agents, and
// the dry-run preview's batches against the order the rollout then takes.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call } from '../../src/cli/client/call.ts';
import { applyCommand } from '../../src/cli/commands/write.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { ManualClock } from '../../src/controlplane/replica/clock.ts';
import { LeaderWriter } from '../../src/controlplane/replica/leader-writer.ts';
import { RolloutController } from '../../src/controlplane/controllers/rollout-controller.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { serverPerTest } from '../helpers/server-fixture.ts';

const { server, agents, start: startServer } = serverPerTest();

const kargConfig = (value: string) => ({ source: 'karg.yaml', text: mcYaml('50-karg', 'worker', `  kernelArguments: [${value}]\n`) });
const sshConfig = (key: string) => ({ source: 'ssh.yaml', text: mcYaml('50-ssh', 'worker', `  config:\n    ignition: {version: 3.4.0}\n    passwd: {users: [{name: core, sshAuthorizedKeys: ["${key}"]}]}\n`) });
const apply = (c: Clients, dryRun: boolean, ...manifests: { source: string; text: string }[]) => call(c, c.config.apply.bind(c.config), { manifests, dryRun }, 'apply');
const getPool = (c: Clients) => call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');

async function fleet(labels: Record<string, string>[]): Promise<SimulatedAgent[]> {
  const out: SimulatedAgent[] = [];
  for (const [i, extra] of labels.entries()) {
    const name = `node-${i}`;
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, autoDone: false, labels: { 'node-role.kubernetes.io/worker': '', ...extra } });
    await agent.connect(); // one at a time: registration order is age order
    out.push(agent);
  }
  agents.push(...out);
  return out;
}

async function settle(c: Clients, nodes: SimulatedAgent[]): Promise<string> {
  const target = (await getPool(c)).status!.configuration;
  for (const n of nodes) await n.waitFor(() => n.lastAssignment?.renderedConfig === target);
  for (const n of nodes) n.report({ currentConfig: target, desiredConfig: target, state: 'Done' });
  await eventually(async () => (await getPool(c)).status!.updatedMachineCount === nodes.length, 10_000, 'all updated');
  return target;
}

test('a disruption budget per rack: one node per rack at a time, a node without the label in group ""; the preview\'s batches are the order taken', async () => {
  await startServer();
  const c = server.admin();
  const pool = { source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 10\n  disruptionBudget: {groupBy: [example.com/rack], maxUnavailable: 1}\n') };
  await apply(c, false, pool, kargConfig('a=1'));
  const rack = (r: string) => ({ 'example.com/rack': r });
  const nodes = await fleet([rack('r1'), rack('r2'), rack('r1'), rack('r3'), {}, rack('r2'), {}]);
  await settle(c, nodes);

  const preview = await apply(c, true, kargConfig('a=2'));
  const batches = Object.fromEntries(preview.nodePreviews.map((n) => [n.node, n.batch]));
  assert.deepEqual(batches, { 'node-0': 1, 'node-1': 1, 'node-2': 2, 'node-3': 1, 'node-4': 1, 'node-5': 2, 'node-6': 2 });
  assert.ok(preview.nodePreviews.every((n) => n.action === 'reboot'));
  // mcctl's -o json carries the same preview for machines.
  const dir = mkdtempSync(join(tmpdir(), 'preview-'));
  writeFileSync(join(dir, 'karg.yaml'), kargConfig('a=2').text);
  const json = JSON.parse(await applyCommand(c, [join(dir, 'karg.yaml')], true, () => {}, 'json'));
  assert.deepEqual(json.objects, [{ kind: 'MachineConfig', name: '50-karg', action: 'configured' }]);
  assert.deepEqual(json.pools[0].diff.kernelArgumentsAdded, ['a=2']);
  assert.deepEqual(json.pools[0].diff.kernelArgumentsRemoved, ['a=1']);
  assert.deepEqual(json.nodes.map((n: { node: string; order: number; rules: { change: string; rule: string }[] }) => [n.node, n.order]), [['node-0', 1], ['node-1', 2], ['node-2', 3], ['node-3', 4], ['node-4', 5], ['node-5', 6], ['node-6', 7]]);
  assert.deepEqual(json.nodes[0].rules, [{ change: 'kernelArguments changed', actions: 'reboot', rule: 'default: kernelArguments changes always reboot (no policy can change that)' }]);

  await apply(c, false, kargConfig('a=2'));
  const target = (await getPool(c)).status!.configuration;
  const assigned = () => nodes.filter((n) => n.lastAssignment?.renderedConfig === target).map((n) => n.options.name).sort();
  await eventually(async () => assigned().length === 4, 10_000, 'first batch');
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(assigned(), ['node-0', 'node-1', 'node-3', 'node-4'], 'one per rack and one of the unlabeled group ""');
  await eventually(async () => /held by the disruption budget \(at most 1 unavailable per example\.com\/rack group\): node-2, node-5, node-6/.test((await getPool(c)).status!.conditions.find((x) => x.type === 'Updating')!.message), 10_000, 'condition names the held nodes');
  for (const n of nodes.filter((x) => x.lastAssignment?.renderedConfig === target)) n.report({ currentConfig: target, desiredConfig: target, state: 'Done' });
  await eventually(async () => assigned().length === 7, 10_000, 'second batch');
});

test('a closed window holds reboots but not an SSH key change; they go once it opens', async () => {
  const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z'));
  await startServer({ clock });
  const c = server.admin();
  // Every day 02:00-03:00 New York (07:00Z in winter).
  const pool = { source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 2\n  maintenanceWindows: [{schedule: "0 2 * * *", duration: 1h, timeZone: America/New_York}]\n') };
  await apply(c, false, pool, kargConfig('a=1'), sshConfig('ssh-ed25519 AAAA one'));
  const nodes = await fleet([{}, {}]);
  await settle(c, nodes);

  // An SSH key needs no disruption: it goes at once.
  const keyPreview = await apply(c, true, sshConfig('ssh-ed25519 AAAA two'));
  assert.deepEqual(keyPreview.nodePreviews.map((n) => [n.action, n.batch, n.window]), [['none', 1, '-'], ['none', 1, '-']]);
  await apply(c, false, sshConfig('ssh-ed25519 AAAA two'));
  await settle(c, nodes);

  const rebootPreview = await apply(c, true, kargConfig('a=2'));
  assert.deepEqual(rebootPreview.nodePreviews.map((n) => [n.action, n.batch, n.window]), [['reboot', 1, '2026-11-23T07:00Z (in 21h)'], ['reboot', 1, '2026-11-23T07:00Z (in 21h)']]);
  await apply(c, false, kargConfig('a=2'));
  const target = (await getPool(c)).status!.configuration;
  await eventually(async () => (await getPool(c)).status!.conditions.find((x) => x.type === 'Updating')!.reason === 'WaitingForMaintenanceWindow', 10_000, 'waiting');
  assert.ok(nodes.every((n) => n.lastAssignment?.renderedConfig !== target), 'nothing assigned before the window');

  clock.set(Date.parse('2026-11-23T07:00:00Z'));
  server.handle.controlPlane.resync();
  await eventually(async () => nodes.every((n) => n.lastAssignment?.renderedConfig === target), 10_000, 'assigned in the window');
  // Pool status is its own controller, paced while the lane is busy: it may follow the assignment by a pass.
  await eventually(async () => (await getPool(c)).status!.maintenanceWindow === 'open until 2026-11-23T08:00Z', 5_000, 'pool status says the window is open');
});

test('the rollout controller asks to run again when the window opens; scope All holds every update', async () => {
  // Two seconds before a window.
  const clock = new ManualClock(Date.parse('2026-11-23T06:59:58Z'));
  await startServer({ clock });
  const c = server.admin();
  const pool = { source: 'pool.yaml', text: poolYaml('worker', '  maintenanceWindows: [{schedule: "0 7 * * *", duration: 30m, timeZone: UTC}]\n  maintenanceWindowScope: All\n') };
  await apply(c, false, pool, sshConfig('ssh-ed25519 AAAA one'));
  const [node] = await fleet([{}]);
  await settle(c, [node!]);
  await apply(c, false, sshConfig('ssh-ed25519 AAAA two'));
  const target = (await getPool(c)).status!.configuration;
  await eventually(async () => (await getPool(c)).status!.conditions.find((x) => x.type === 'Updating')!.reason === 'WaitingForMaintenanceWindow', 5_000, 'waiting (scope All holds even an SSH key change)');
  assert.match((await getPool(c)).status!.conditions.find((x) => x.type === 'Updating')!.message, /1 node waits for the next maintenance window to update \(node-0\): it opens at 2026-11-23T07:00Z, in <1m/);
  const cp = server.handle.controlPlane;
  const controller = new RolloutController(cp.cache, new LeaderWriter(cp.cache, cp.election), clock, createLogger({ name: 'test', level: 'silent' }));
  assert.deepEqual(await controller.reconcile('worker', new AbortController().signal), { requeueAfterMs: 2000 });
  clock.set(Date.parse('2026-11-23T07:00:00Z'));
  cp.resync();
  await eventually(async () => node!.lastAssignment?.renderedConfig === target, 10_000, 'assigned in the window');
});

test('a policy change that turns an unfinished update into a reboot waits for the window: the node keeps its policy until it opens', async () => {
  const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z'));
  await startServer({ clock });
  const c = server.admin();
  const fileConfig = (text: string) => ({ source: 'a.yaml', text: mcYaml('50-a', 'worker', `  config:\n    ignition: {version: 3.2.0}\n    storage:\n      files:\n      - {path: /etc/a.conf, mode: 420, contents: {source: "data:,${text}"}}\n`) });
  const pool = (action: string) => ({ source: 'pool.yaml', text: poolYaml('worker', `  maxUnavailable: 1\n  maintenanceWindows: [{schedule: "0 7 * * *", duration: 1h, timeZone: UTC}]\n  disruptionPolicy:\n    files:\n    - {path: /etc/a.conf, actions: [${action}]}\n`) });
  await apply(c, false, pool('{type: restart, unit: chronyd.service}'), fileConfig('one'));
  const [node] = await fleet([{}]);
  await settle(c, [node!]);

  // A restart is not disruptive: it goes outside the window, and fails on the node.
  await apply(c, false, fileConfig('two'));
  const target = (await getPool(c)).status!.configuration;
  await node!.waitFor(() => node!.lastAssignment?.renderedConfig === target);
  node!.report({ desiredConfig: target, state: 'Degraded', phase: 'actions', reason: 'actions: restart chronyd.service: job ended "failed"' });
  await eventually(async () => (await call(c, c.status.getNode.bind(c.status), { name: 'node-0' }, 'get')).status!.state === 'Degraded', 10_000, 'Degraded');

  // Under the new policy its retry reboots: not before 07:00Z.
  const sent = node!.assignments.length;
  await apply(c, false, pool('{type: Reboot}'));
  await eventually(() => server.logs.some((l) => l.includes('under the new one it waits for the maintenance window')), 10_000, 'the rollout saw the change');
  const stored = () => JSON.parse(server.handle.controlPlane.cache.assignments.get('node-0')!.value.disruptionPolicyJson!);
  assert.deepEqual(stored().files, [{ path: '/etc/a.conf', actions: [{ type: 'restart', unit: 'chronyd.service' }] }]);
  assert.equal(node!.assignments.length, sent, 'nothing sent while the window is closed');

  clock.set(Date.parse('2026-11-23T07:00:00Z'));
  server.handle.controlPlane.resync();
  await node!.waitFor(() => node!.assignments.length > sent, 10_000);
  assert.deepEqual(JSON.parse(node!.lastAssignment!.disruptionPolicyJson).files, [{ path: '/etc/a.conf', actions: [{ type: 'reboot' }] }]);
  assert.deepEqual(stored().files, [{ path: '/etc/a.conf', actions: [{ type: 'reboot' }] }]);
});

test('the preview follows nodes a changed nodeSelector moves: into the pool that now selects them, or out of every pool', async () => {
  await startServer();
  const c = server.admin();
  const rack = (n: string) => ({ 'topology.kubernetes.io/rack': n });
  const infra = (selector: string) => ({ source: 'infra.yaml', text: `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: infra}
spec:
  machineConfigSelector: {matchExpressions: [{key: machineconfiguration.openshift.io/role, operator: In, values: [worker, infra]}]}
  nodeSelector: {matchLabels: {${selector}}}
` });
  await apply(c, false, infra('topology.kubernetes.io/rack: r9'), kargConfig('a=1'), { source: 'infra-mc.yaml', text: mcYaml('50-infra', 'infra', '  kernelArguments: [infra=1]\n') });
  const nodes = await fleet([rack('r1'), rack('r2')]);
  await settle(c, nodes);
  // The racks an agent reports describe it; an operator's label is what may move it to a pool.
  for (const [i, r] of ['r1', 'r2'].entries()) {
    await call(c, c.config.labelNode.bind(c.config), { name: `node-${i}`, set: rack(r), remove: [] }, 'label node');
  }

  // infra now selects rack r1: node-0 moves there and takes infra's config (its karg: a reboot).
  const preview = await apply(c, true, infra('topology.kubernetes.io/rack: r1'));
  const row = (node: string) => preview.nodePreviews.find((n) => n.node === node);
  assert.equal(row('node-0')?.pool, 'infra');
  assert.equal(row('node-0')?.action, 'reboot');
  assert.match(row('node-0')!.why, /^moves from pool worker \(its labels match this pool's nodeSelector now\); kernelArguments changed/);
  assert.ok(preview.poolPreviews.some((p) => p.pool === 'worker'), 'the pool it leaves is listed too');
  assert.equal(row('node-1')?.pool, 'worker');
  assert.equal(row('node-1')?.action, 'none');

  // A worker pool that selects only rack r1 leaves node-1 in no pool: said, with the reason.
  const narrowWorker = { source: 'worker.yaml', text: poolYaml('worker').replace('nodeSelector: {matchLabels: {node-role.kubernetes.io/worker: ""}}', 'nodeSelector: {matchLabels: {topology.kubernetes.io/rack: r1}}') };
  assert.ok(narrowWorker.text.includes('rack: r1'));
  const leaving = (await apply(c, true, narrowWorker)).nodePreviews.find((n) => n.node === 'node-1');
  assert.deepEqual([leaving?.pool, leaving?.action], ['', 'none']);
  assert.match(leaving!.why, /^leaves pool worker: no MachineConfigPool nodeSelector matches the node's labels/);
  assert.match(leaving!.note, /keeps its current config and gets no updates/);

  // The apply then does what the preview said.
  await apply(c, false, infra('topology.kubernetes.io/rack: r1'));
  await eventually(async () => (await call(c, c.status.getNode.bind(c.status), { name: 'node-0' }, 'get')).pool === 'infra', 10_000, 'node-0 in infra');
});

test('the preview takes each batch to last what the pool\'s recent updates took: the third reboot goes in the next window', async () => {
  const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z')); // a Sunday
  await startServer({ clock });
  const c = server.admin();
  const pool = { source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 1\n  maintenanceWindows: [{schedule: "0 2 * * 6", duration: 1h, timeZone: UTC}]\n') };
  await apply(c, false, pool, kargConfig('a=1'));
  const nodes = await fleet([{}, {}, {}]);
  await settle(c, nodes);
  // Each node rebooted for two updates that took 40 and 44 minutes (as its history records them),
  // and made one quick change: the reboots' median, 42 minutes, is what a reboot batch takes.
  const update = (i: number, minutes: number, disruption: string) => ({
    id: `u${i}`, fromConfig: 'a', toConfig: 'b', startedUnixMs: 1_000_000 * i, endedUnixMs: 1_000_000 * i + minutes * 60_000,
    phases: [], disruption, result: 'Done', reason: '',
  });
  await server.handle.controlPlane.store.commit(nodes.map((n) => ({
    type: 'put' as const, kind: 'NodeHistory' as const, name: n.options.name, expectedVersion: null,
    value: { updates: [update(1, 40, 'reboot: kernelArguments changed'), update(2, 44, 'reboot: osImageURL changed'), update(3, 0.1, 'none')] },
  })));

  const dir = mkdtempSync(join(tmpdir(), 'preview-'));
  writeFileSync(join(dir, 'karg.yaml'), kargConfig('a=2').text);
  const json = JSON.parse(await applyCommand(c, [join(dir, 'karg.yaml')], true, () => {}, 'json'));
  assert.equal(json.pools[0].batchSeconds, 42 * 60);
  assert.equal(json.pools[0].batchBasis, 'median of 6 recent updates that rebooted in this pool');
  assert.deepEqual(json.nodes.map((n: { node: string; batch: number; window: string }) => [n.node, n.batch, n.window]), [
    ['node-0', 1, '2026-11-28T02:00Z (in 5d16h)'],
    ['node-1', 2, '2026-11-28T02:00Z (in 5d16h)'],
    ['node-2', 3, '2026-12-05T02:00Z (in 12d16h)'],
  ]);
  const text = await applyCommand(c, [join(dir, 'karg.yaml')], true);
  assert.match(text, /^ {2}batches: about 42m each \(median of 6 recent updates that rebooted in this pool\)$/m);
});
