// spec.rollout and spec.healthCheck: every field validated with a problem naming the pool, the
// field and the rule; the canary batch as the preview asks for it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { canaryNames, isCanary, previewRollout, type NodeRecord } from '../../src/machineconfig/index.ts';
import { nodeRecord } from '../helpers/nodes.ts';
import { parseValid, poolDoc, problemsOf } from '../helpers/manifests.ts';

const base = { machineConfigSelector: {}, nodeSelector: { matchLabels: { a: 'b' } } };

test('a valid rollout and health check are kept as written, with defaults', () => {
  const { pools } = parseValid(poolDoc('web', { ...base, rollout: { canary: '10%', soak: '1h30m', maxFailures: 2, onFailure: 'Rollback' }, healthCheck: { units: ['nginx.service'], command: ['/usr/bin/curl', '-f', 'http://localhost/'] } }));
  assert.deepEqual(pools[0]!.spec.rollout, { canary: '10%', soak: '1h30m', maxFailures: 2, onFailure: 'Rollback' });
  assert.deepEqual(pools[0]!.spec.healthCheck, { units: ['nginx.service'], command: ['/usr/bin/curl', '-f', 'http://localhost/'], timeout: '2m' });
  assert.deepEqual(parseValid(poolDoc('p', { ...base, rollout: { canary: 1 } })).pools[0]!.spec.rollout, { canary: 1, maxFailures: 0, onFailure: 'Pause' });
});

test('every bad field is named with its rule', () => {
  const problems = problemsOf(poolDoc('web', {
    ...base,
    rollout: { canary: '150%', soak: 'ten minutes', maxFailures: -1, onFailure: 'Explode', batch: 3 },
    healthCheck: { units: ['nginx'], command: ['curl'], timeout: '2d' },
  }));
  const seen = problems.map((p) => `${p.object} ${p.field} ${p.rule}`);
  assert.deepEqual(seen.sort(), [
    'MachineConfigPool/web spec.healthCheck.command[0] path-absolute',
    'MachineConfigPool/web spec.healthCheck.timeout duration',
    'MachineConfigPool/web spec.healthCheck.units[0] unit-name',
    'MachineConfigPool/web spec.rollout.batch unknown-field',
    'MachineConfigPool/web spec.rollout.canary canary',
    'MachineConfigPool/web spec.rollout.maxFailures max-failures',
    'MachineConfigPool/web spec.rollout.onFailure on-failure',
    'MachineConfigPool/web spec.rollout.soak duration',
  ]);
  assert.match(problems.find((p) => p.field === 'spec.rollout.onFailure')!.message, /"Explode" is not one of Pause, Rollback/);
  const empty = problemsOf(poolDoc('web', { ...base, healthCheck: {}, rollout: { soak: '5m' } }));
  assert.deepEqual(empty.map((p) => `${p.field} ${p.rule}`).sort(), ['spec.healthCheck required', 'spec.rollout.soak soak-needs-canary']);
  // A soak past a week is refused (a huge one would end past what a Date holds, and stall the pool).
  for (const soak of ['8d', '99999999999999999999d']) {
    assert.deepEqual(problemsOf(poolDoc('web', { ...base, rollout: { canary: 1, soak } })).map((p) => `${p.field} ${p.rule}`), ['spec.rollout.soak duration'], soak);
  }
  assert.equal(parseValid(poolDoc('web', { ...base, rollout: { canary: 1, soak: '7d' } })).pools[0]!.spec.rollout!.soak, '7d');
});

test('the canaries are the first nodes in the rollout order (zone, then oldest), a percentage rounded up', () => {
  const node = (name: string, zone: string, registeredAt: number) => ({ name, labels: { 'topology.kubernetes.io/zone': zone }, registeredAt } as unknown as NodeRecord);
  const nodes = [node('a', 'z2', 1), node('b', 'z1', 5), node('c', 'z1', 3), node('d', 'z2', 0)];
  const pool = (canary: number | string) => parseValid(poolDoc('p', { ...base, rollout: { canary } })).pools[0]!;
  assert.deepEqual([...canaryNames(pool(2), nodes)], ['c', 'b']);
  assert.deepEqual([...canaryNames(pool('25%'), nodes)], ['c']);
  assert.deepEqual([...canaryNames(pool('30%'), nodes)], ['c', 'b']);
  assert.equal(isCanary(pool(1), 'c', nodes), true);
  assert.equal(isCanary(pool(1), 'd', nodes), false);
  assert.equal(canaryNames(pool(0), nodes).size, 0);
});

test('the preview puts the canaries in the first batch and the rest after the soak', () => {
  const { pools: [pool] } = parseValid(poolDoc('worker', { ...base, maxUnavailable: 2, rollout: { canary: 1, soak: '10m' } }));
  const nodes = ['a', 'b', 'c', 'd'].map((n, i) => nodeRecord(n, { registeredAt: i, desiredConfig: 'old', status: { currentConfig: 'old', state: 'Done' } }));
  const schedule = previewRollout(pool!, 'new', nodes, { now: 1_000 });
  assert.deepEqual(schedule.map((s) => [s.node, s.batch, s.startsAt]), [['a', 1, 1_000], ['b', 2, 601_000], ['c', 2, 601_000], ['d', 3, 601_000]]);
  assert.ok(isCanary(pool!, 'a', nodes) && !isCanary(pool!, 'b', nodes));
});
