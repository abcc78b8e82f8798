// The pool's spec.drain (an mcplane addition) and the NodeDrainStalled condition, pure.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { computePoolStatus, conditionOf, defaultPools, formatDuration } from '../../src/machineconfig/index.ts';
import { parseValid, poolDoc, problemsOf } from '../helpers/manifests.ts';
import { nodeRecord } from '../helpers/nodes.ts';

const worker = (drain: unknown) => poolDoc('worker', {
  machineConfigSelector: { matchLabels: { 'machineconfiguration.openshift.io/role': 'worker' } },
  nodeSelector: { matchLabels: { 'node-role.kubernetes.io/worker': '' } },
  drain,
});

test('spec.drain is read with its three fields; defaults are applied where it is used', () => {
  const { pools } = parseValid(worker({ timeoutSeconds: 3600, onTimeout: 'Degrade', stalledAfterSeconds: 300 }));
  assert.deepEqual(pools[0]!.spec.drain, { timeoutSeconds: 3600, onTimeout: 'Degrade', stalledAfterSeconds: 300 });
  assert.deepEqual(parseValid(worker({})).pools[0]!.spec.drain, {});
  assert.equal(parseValid(poolDoc('worker', { nodeSelector: null, machineConfigSelector: null })).pools[0]!.spec.drain, undefined);
});

test('bad drain fields are refused with the object, the field and the rule', () => {
  const problems = problemsOf(worker({ timeoutSeconds: 0, onTimeout: 'Evict', stalledAfterSeconds: '10m', grace: 1 }));
  const seen = problems.map((p) => `${p.object} ${p.field} [${p.rule}]`).sort();
  assert.deepEqual(seen, [
    'MachineConfigPool/worker spec.drain.grace [unknown-field]',
    'MachineConfigPool/worker spec.drain.onTimeout [drain-timeout-action]',
    'MachineConfigPool/worker spec.drain.stalledAfterSeconds [type]',
    'MachineConfigPool/worker spec.drain.timeoutSeconds [positive]',
  ]);
  assert.match(problems.find((p) => p.rule === 'drain-timeout-action')!.message, /onTimeout "Evict" is not one of Wait, Degrade/);
  const degradeAlone = problemsOf(worker({ onTimeout: 'Degrade' }));
  assert.equal(degradeAlone[0]?.rule, 'requires-timeout');
  assert.match(degradeAlone[0]!.message, /onTimeout Degrade needs timeoutSeconds/);
});

test('NodeDrainStalled: absent without the cluster\'s Nodes, False while drains are young, True naming the stalled ones', () => {
  const pool = defaultPools()[1]!;
  const nodes = [nodeRecord('a'), nodeRecord('b')];
  const base = { pool, target: 'old', targetSources: [], nodes, now: 1_000_000 };
  assert.equal(conditionOf(computePoolStatus(base), 'NodeDrainStalled'), undefined);
  assert.equal(conditionOf(computePoolStatus({ ...base, drains: [] }), 'NodeDrainStalled')?.message, 'no node is draining');
  const young = computePoolStatus({ ...base, drains: [{ node: 'a', startedAt: 1_000_000 - 599_000, reason: 'draining: x' }] });
  assert.equal(conditionOf(young, 'NodeDrainStalled')?.status, 'False');
  const stalled = computePoolStatus({ ...base, drains: [{ node: 'a', startedAt: 0, reason: 'draining: blocked' }, { node: 'b', startedAt: 999_000, reason: 'y' }] });
  const c = conditionOf(stalled, 'NodeDrainStalled')!;
  assert.equal(c.status, 'True');
  assert.equal(c.reason, 'DrainStalled');
  assert.equal(c.message, '1 node has been draining for longer than 10m: a (since 1970-01-01T00:00:00.000Z: draining: blocked)');
  const custom = computePoolStatus({ ...base, drains: [{ node: 'b', startedAt: 999_000, reason: 'y' }], drainStalledAfterMs: 500 });
  assert.equal(conditionOf(custom, 'NodeDrainStalled')?.status, 'True');
  assert.equal(formatDuration(5_400_000), '1h30m');
  assert.equal(formatDuration(150), '150ms');
});
