import assert from 'node:assert/strict';
import { test } from 'node:test';
import { computePoolStatus, conditionOf, defaultPools } from '../../src/machineconfig/index.ts';
import { nodeRecord } from '../helpers/nodes.ts';

const worker = defaultPools()[1]!;
const onTarget = (name: string) => nodeRecord(name, { desiredConfig: 'r2', status: { currentConfig: 'r2', desiredConfig: 'r2' } });

test('counts follow MCO: updated, ready, unavailable, degraded', () => {
  const nodes = [
    onTarget('a'),
    { ...onTarget('b'), connected: false },
    nodeRecord('c', { desiredConfig: 'r2', status: { state: 'Working', phase: 'apply' } }),
    nodeRecord('d', { status: { state: 'Degraded', reason: 'apply: file /etc/x: EACCES' } }),
  ];
  const s = computePoolStatus({ pool: worker, target: 'r2', targetSources: ['m'], nodes, now: 1 });
  assert.deepEqual(
    [s.machineCount, s.updatedMachineCount, s.readyMachineCount, s.unavailableMachineCount, s.degradedMachineCount],
    [4, 2, 1, 3, 1],
  );
  assert.equal(conditionOf(s, 'Updated')!.status, 'False');
  const updating = conditionOf(s, 'Updating')!;
  assert.equal(updating.status, 'True');
  assert.match(updating.message, /2 of 4 nodes updated to r2, at most 1 unavailable at a time; updating now: c \(updating\)/);
  const nodeDegraded = conditionOf(s, 'NodeDegraded')!;
  assert.equal(nodeDegraded.status, 'True');
  assert.match(nodeDegraded.message, /d \(Degraded: apply: file \/etc\/x: EACCES\)/);
  assert.equal(conditionOf(s, 'Degraded')!.status, 'True');
});

test('all updated: Updated True, Updating False', () => {
  const s = computePoolStatus({ pool: worker, target: 'r2', targetSources: [], nodes: [onTarget('a'), onTarget('b')], now: 1 });
  assert.equal(conditionOf(s, 'Updated')!.status, 'True');
  assert.equal(conditionOf(s, 'Updating')!.status, 'False');
  assert.equal(conditionOf(s, 'Degraded')!.status, 'False');
});

test('a render failure keeps the last good config and says why, never with an empty message', () => {
  const problems = [{ object: 'MachineConfig/x', field: 'spec.kernelType', rule: 'kernel-type', message: 'unknown kernelType "y"' }];
  const s = computePoolStatus({ pool: worker, target: 'r1', targetSources: [], nodes: [], renderProblems: problems, now: 1 });
  const rd = conditionOf(s, 'RenderDegraded')!;
  assert.equal(rd.status, 'True');
  assert.match(rd.message, /nodes keep r1: MachineConfig\/x: spec\.kernelType: unknown kernelType "y" \[kernel-type\]/);
  assert.equal(conditionOf(s, 'Degraded')!.status, 'True');
  assert.equal(s.configuration, 'r1');
  for (const c of s.conditions) assert.ok(c.message.length > 0, c.type);
});

test('a paused pool says so in Updating and names who waits', () => {
  const paused = structuredClone(worker);
  paused.spec.paused = true;
  const s = computePoolStatus({ pool: paused, target: 'r2', targetSources: [], nodes: [onTarget('a'), nodeRecord('b')], now: 1 });
  const u = conditionOf(s, 'Updating')!;
  assert.equal(u.status, 'False');
  assert.equal(u.reason, 'Paused');
  assert.match(u.message, /paused: 1 node waits for r2 \(b\)/);
});

test('lastTransitionTime moves only when a condition changes status', () => {
  const first = computePoolStatus({ pool: worker, target: 'r2', targetSources: [], nodes: [onTarget('a')], now: 100 });
  const same = computePoolStatus({ pool: worker, target: 'r2', targetSources: [], nodes: [onTarget('a')], previous: first.conditions, now: 200 });
  assert.equal(conditionOf(same, 'Updated')!.lastTransitionTime, 100);
  const changed = computePoolStatus({ pool: worker, target: 'r3', targetSources: [], nodes: [onTarget('a')], previous: first.conditions, now: 300 });
  assert.equal(conditionOf(changed, 'Updated')!.lastTransitionTime, 300);
});
