// The arithmetic behind two server metrics, on a clock the test moves: the rollout ETA (mean of
// recent assigned->Done times x waves left) and the phase clock (what it observes, and when).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { MachineConfigPool, PoolStatus } from '../../src/machineconfig/index.ts';
import type { NodeView } from '../../src/controlplane/cache/cluster-cache.ts';
import { PhaseTracker } from '../../src/controlplane/metrics/phase-tracker.ts';
import { RECENT_UPDATES, RolloutEta } from '../../src/controlplane/metrics/rollout-eta.ts';
import { nodeRecord } from '../helpers/nodes.ts';

const pool = (maxUnavailable: number | string, paused = false) => ({
  apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfigPool', metadata: { name: 'worker' },
  spec: { maxUnavailable, paused, machineConfigSelector: {}, nodeSelector: {} },
}) as unknown as MachineConfigPool;
const status = (machineCount: number, updatedMachineCount: number, updating?: string) => ({ configuration: 'rendered-new', machineCount, updatedMachineCount, conditions: updating ? [{ type: 'Updating', status: 'False', reason: updating, message: '', lastTransitionTime: 0 }] : [] }) as PoolStatus;
const view = (name: string, desired: string, current: string, state: 'Done' | 'Working' = 'Done'): NodeView =>
  ({ ...nodeRecord(name, { desiredConfig: desired, status: { currentConfig: current, desiredConfig: desired, state } }), poolLabels: {}, resourceVersion: '1' });

test('ETA: mean of the timed updates x ceil(nodes left / maxUnavailable); absent when nothing rolls out, paused, or untimed', () => {
  let now = 0;
  const eta = new RolloutEta(() => now);
  assert.equal(eta.etaSeconds(pool(1), status(10, 0)), undefined, 'nothing timed yet');
  // Two nodes assigned at t=0, done at 60 s and 120 s: mean 90 s.
  eta.observe(view('a', 'rendered-new', 'rendered-old', 'Working'), 'a', false);
  eta.observe(view('b', 'rendered-new', 'rendered-old', 'Working'), 'b', false);
  now = 60_000;
  eta.observe(view('a', 'rendered-new', 'rendered-new'), 'a', false);
  now = 120_000;
  eta.observe(view('b', 'rendered-new', 'rendered-new'), 'b', false);
  assert.deepEqual(eta.recent('worker'), [60, 120]);
  assert.equal(eta.etaSeconds(pool(1), status(10, 2)), 90 * 8);
  assert.equal(eta.etaSeconds(pool(3), status(10, 2)), 90 * 3, '8 nodes, 3 at a time: 3 waves');
  assert.equal(eta.etaSeconds(pool('50%'), status(10, 2)), 90 * 2, '50% of 10 is 5 at a time');
  assert.equal(eta.etaSeconds(pool(1), status(10, 10)), undefined, 'all updated');
  assert.equal(eta.etaSeconds(pool(1, true), status(10, 2)), undefined, 'paused');
  // A pool waiting for its maintenance window adds the wait: 01:00 UTC, the window opens at 02:00.
  now = Date.parse('2026-01-01T01:00:00Z');
  const windowed = { ...pool(1), spec: { ...pool(1).spec, maintenanceWindows: [{ schedule: '0 2 * * *', duration: '1h', timeZone: 'UTC' }] } } as MachineConfigPool;
  assert.equal(eta.etaSeconds(windowed, status(10, 2, 'WaitingForMaintenanceWindow')), 90 * 8 + 3600, 'the waves after an hour\'s wait');
  assert.equal(eta.etaSeconds(windowed, status(10, 2, 'RollingOut')), 90 * 8, 'inside a window: the waves only');
  // A node first seen mid-update (a replica's start) is not timed: its assignment time is unknown.
  eta.observe(view('c', 'rendered-new', 'rendered-old', 'Working'), 'c', true);
  now = 130_000;
  eta.observe(view('c', 'rendered-new', 'rendered-new'), 'c', false);
  assert.deepEqual(eta.recent('worker'), [60, 120]);
  // Only the last few count.
  for (let i = 0; i < RECENT_UPDATES + 2; i++) {
    eta.observe(view(`n${i}`, 'rendered-newer', 'rendered-new', 'Working'), `n${i}`, false);
    now += 10_000;
    eta.observe(view(`n${i}`, 'rendered-newer', 'rendered-newer'), `n${i}`, false);
  }
  assert.deepEqual(eta.recent('worker'), Array(RECENT_UPDATES).fill(10));
});

test('phase clock: a phase is observed when it ends, only from local reports, only while Working; unknown phases are "other"', () => {
  let now = 0;
  const seen: [string, number][] = [];
  const t = new PhaseTracker((phase, s) => seen.push([phase, s]), () => now);
  t.report('n', { state: 'Working', phase: 'apply' }, true);
  now = 2000;
  t.report('n', { state: 'Working', phase: 'apply' }, true); // the same phase again (a heartbeat)
  now = 5000;
  t.report('n', { state: 'Working', phase: 'reboot' }, true);
  assert.deepEqual(seen, [['apply', 5]]);
  assert.equal(t.since('n'), 5000);
  now = 9000;
  t.report('n', { state: 'Working', phase: 'validate' }, false); // seen through the cache: moves the clock only
  assert.deepEqual(seen, [['apply', 5]]);
  now = 10_000;
  t.report('n', { state: 'Degraded', phase: 'validate' }, true);
  now = 60_000;
  t.report('n', { state: 'Working', phase: 'x'.repeat(500) }, true); // Degraded time is not a phase's
  now = 61_000;
  t.report('n', { state: 'Done', phase: 'done' }, true);
  assert.deepEqual(seen, [['apply', 5], ['validate', 1], ['other', 1]]);
  t.forget('n');
  assert.equal(t.since('n'), undefined);
});
