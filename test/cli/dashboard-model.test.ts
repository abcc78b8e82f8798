// The dashboard's rules, from Watch events to what the page draws: which bar segment a node is
// in, the pool counts, and when the time in phase is exact. (The page itself: dashboard-browser.test.ts.)

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DashboardModel, nodeBucket } from '../../src/cli/dashboard/dashboard-model.ts';
import type { MachineConfigPool__Output } from '../../src/runtime/generated/mcplane/v1/MachineConfigPool.ts';
import type { NodeStatus__Output } from '../../src/runtime/generated/mcplane/v1/NodeStatus.ts';
import type { Node__Output } from '../../src/runtime/generated/mcplane/v1/Node.ts';
import type { WatchEvent__Output } from '../../src/runtime/generated/mcplane/v1/WatchEvent.ts';

function node(name: string, status: Partial<NodeStatus__Output> = {}, pool = 'worker'): Node__Output {
  return {
    name, pool, labels: { 'topology.kubernetes.io/zone': 'z1' }, registrationTimeUnixMs: 1, resourceVersion: '1', certificateNotAfterUnixMs: 0,
    status: { currentConfig: 'r-old', desiredConfig: 'r-old', state: 'Done', phase: 'done', reason: '', drift: [], os: null, bootId: 'b', lastSeenUnixMs: 5, connected: true, agentVersion: 'v', lastDisruption: '', ...status },
  } as Node__Output;
}

function pool(name: string, target: string): MachineConfigPool__Output {
  return {
    name, specJson: '{}', paused: false, maxUnavailable: '1', resourceVersion: '1', creationTimeUnixMs: 1, labels: {},
    status: { configuration: target, configurationSources: [], machineCount: 0, updatedMachineCount: 0, readyMachineCount: 0, unavailableMachineCount: 0, degradedMachineCount: 0, maintenanceWindow: '',
      conditions: [{ type: 'NodeDegraded', status: target === 'r-bad' ? 'True' : 'False', reason: 'NodesDegraded', message: '1 node is degraded', lastTransitionTimeUnixMs: 0 }] },
  } as MachineConfigPool__Output;
}

const ev = (type: string, o: { pool?: MachineConfigPool__Output; node?: Node__Output }): WatchEvent__Output => ({ type, object: o.pool ? 'pool' : 'node', ...o }) as WatchEvent__Output;

test('each node is in one bucket: degraded, then disconnected, then updating, waiting or updated', () => {
  assert.equal(nodeBucket(node('n', { state: 'Degraded', connected: false }), 'r-new'), 'degraded', 'degraded wins over disconnected');
  assert.equal(nodeBucket(node('n', { state: 'Unreconcilable' }), 'r-new'), 'degraded');
  // A failed health gate or try: back on the old config, reporting the one it left as desired.
  assert.equal(nodeBucket(node('n', { state: 'TryReverted', phase: 'try', desiredConfig: 'r-new' }), 'r-new'), 'degraded');
  assert.equal(nodeBucket(node('n', { state: 'RolledBack', phase: 'rollback', desiredConfig: 'r-new' }), 'r-new'), 'degraded');
  assert.equal(nodeBucket(node('n', { state: 'Working', connected: false }), 'r-new'), 'disconnected');
  assert.equal(nodeBucket(node('n', { state: 'Working', phase: 'apply', desiredConfig: 'r-new' }), 'r-new'), 'updating');
  assert.equal(nodeBucket(node('n', { desiredConfig: 'r-new' }), 'r-new'), 'updating', 'assigned, not started');
  assert.equal(nodeBucket(node('n'), 'r-new'), 'waiting', 'on the old config, not assigned yet');
  assert.equal(nodeBucket(node('n', { currentConfig: 'r-new', desiredConfig: 'r-new' }), 'r-new'), 'updated');
  assert.equal(nodeBucket(node('n'), undefined), 'waiting', 'a pool with nothing rendered has no node updated');
});

test('a snapshot, then changes: pool counts follow the nodes, and a new target moves updated nodes to waiting', () => {
  let now = 1000;
  const m = new DashboardModel(() => now);
  m.applySnapshot([ev('ADDED', { pool: pool('worker', 'r-old') }), ev('ADDED', { node: node('a') }), ev('ADDED', { node: node('b') })]);
  const snap = m.snapshot();
  assert.deepEqual(snap.pools[0]!.counts, { degraded: 0, disconnected: 0, updating: 0, waiting: 0, updated: 2 });
  assert.equal(snap.nodes[0]!.zone, 'z1');
  assert.equal(snap.nodes[0]!.phaseSinceExact, false, 'met in a snapshot: the phase began earlier');
  m.takeUpdate();

  now = 2000;
  m.applyChange(ev('MODIFIED', { pool: pool('worker', 'r-new') }));
  const retarget = m.takeUpdate()!;
  assert.deepEqual(retarget.pools[0]!.counts, { degraded: 0, disconnected: 0, updating: 0, waiting: 2, updated: 0 });
  assert.deepEqual(retarget.nodes.map((n) => [n.name, n.bucket, n.phaseSinceMs]), [['a', 'waiting', 1000], ['b', 'waiting', 1000]], 'the nodes\' own phase did not change');

  now = 3000;
  m.applyChange(ev('MODIFIED', { node: node('a', { state: 'Working', phase: 'apply', desiredConfig: 'r-new' }) }));
  const working = m.takeUpdate()!;
  assert.deepEqual(working.nodes.map((n) => [n.name, n.bucket, n.phase, n.phaseSinceMs, n.phaseSinceExact]), [['a', 'updating', 'apply', 3000, true]]);
  assert.equal(working.pools[0]!.counts.updating, 1);
  assert.equal(m.takeUpdate(), undefined, 'nothing pending after a take');

  now = 4000;
  m.applyChange(ev('MODIFIED', { node: node('a', { state: 'Working', phase: 'apply', desiredConfig: 'r-new', lastSeenUnixMs: 99 }) }));
  assert.equal(m.takeUpdate()!.nodes[0]!.phaseSinceMs, 3000, 'same phase: the clock keeps running');
  m.applyChange(ev('MODIFIED', { node: node('a', { state: 'Degraded', phase: 'apply', desiredConfig: 'r-new', reason: 'apply: EROFS' }) }));
  m.applyChange(ev('MODIFIED', { pool: pool('worker', 'r-bad') }));
  const degraded = m.takeUpdate()!;
  assert.equal(degraded.nodes.find((n) => n.name === 'a')!.reason, 'apply: EROFS');
  assert.deepEqual(degraded.pools[0]!.alerts, [{ type: 'NodeDegraded', message: '1 node is degraded' }]);

  m.applyChange(ev('DELETED', { node: node('b') }));
  const deleted = m.takeUpdate()!;
  assert.deepEqual(deleted.deletedNodes, ['b']);
  assert.equal(deleted.pools[0]!.counts.waiting, 0);
});

test('a snapshot after a reconnect deletes what is gone, and marks phases that changed meanwhile as inexact', () => {
  let now = 1000;
  const m = new DashboardModel(() => now);
  m.applySnapshot([ev('ADDED', { pool: pool('worker', 'r-old') }), ev('ADDED', { pool: pool('infra', 'r-i') }), ev('ADDED', { node: node('a') }), ev('ADDED', { node: node('b') })]);
  m.takeUpdate();
  now = 5000;
  m.applySnapshot([ev('ADDED', { pool: pool('worker', 'r-old') }), ev('ADDED', { node: node('a', { state: 'Working', phase: 'reboot', desiredConfig: 'r-x' }) })]);
  const u = m.takeUpdate()!;
  assert.deepEqual(u.deletedPools, ['infra']);
  assert.deepEqual(u.deletedNodes, ['b']);
  assert.deepEqual(u.nodes.map((n) => [n.name, n.phaseSinceMs, n.phaseSinceExact]), [['a', 5000, false]]);
  assert.deepEqual(m.snapshot().pools.map((p) => p.name), ['worker']);
});

test('a node met in a snapshot whose agent reports its running phase\'s start shows the exact time in phase', () => {
  const m = new DashboardModel(() => 9000);
  const currentUpdate = {
    id: 'u1', fromConfig: 'r-old', toConfig: 'r-new', startedUnixMs: 2000, endedUnixMs: 0, disruption: '', result: '', reason: '',
    phases: [
      { name: 'check', startedUnixMs: 2000, endedUnixMs: 2500, source: 'agent' },
      { name: 'reboot', startedUnixMs: 4000, endedUnixMs: 0, source: 'agent' },
    ],
  };
  m.applySnapshot([ev('ADDED', { pool: pool('worker', 'r-new') }), ev('ADDED', { node: node('a', { state: 'Working', phase: 'reboot', desiredConfig: 'r-new', currentUpdate } as Partial<NodeStatus__Output>) })]);
  assert.deepEqual(m.snapshot().nodes.map((n) => [n.name, n.phaseSinceMs, n.phaseSinceExact]), [['a', 4000, true]]);
  // A timeline whose last phase is not the reported one (a report in between) is not trusted.
  m.applySnapshot([ev('ADDED', { pool: pool('worker', 'r-new') }), ev('ADDED', { node: node('b', { state: 'Working', phase: 'validate', desiredConfig: 'r-new', currentUpdate } as Partial<NodeStatus__Output>) })]);
  assert.deepEqual(m.snapshot().nodes.filter((n) => n.name === 'b').map((n) => [n.phaseSinceMs, n.phaseSinceExact]), [[9000, false]]);
});
