// Maintenance windows and per-group disruption budgets, as the rollout rules read them (pure:
// the time is passed in, as the control plane passes its Clock's).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { computePoolStatus, conditionOf, decideRollout, formatWait, previewRollout, windowState, type MaintenanceWindow, type UpdateAction } from '../../src/machineconfig/index.ts';
import { problemsOf, parseValid, poolDoc } from '../helpers/manifests.ts';
import { nodeRecord } from '../helpers/nodes.ts';

const worker = (spec: Record<string, unknown>) => parseValid(poolDoc('worker', {
  machineConfigSelector: { matchLabels: { 'machineconfiguration.openshift.io/role': 'worker' } },
  nodeSelector: { matchLabels: { 'node-role.kubernetes.io/worker': '' } },
  ...spec,
})).pools[0]!;
const at = (iso: string) => Date.parse(iso);
const actions = (m: Record<string, UpdateAction>) => (n: { name: string }) => m[n.name];

test('every field of a window and a budget is checked, each problem naming the pool, the field and the rule', () => {
  const problems = problemsOf(poolDoc('edge', {
    maintenanceWindows: [
      { schedule: '0 2 * *', duration: '2h', timeZone: 'UTC' },
      { schedule: '0 2 * * 6', duration: 'two hours', timeZone: 'Europe/Berlin' },
      { schedule: '0 2 * * 6', duration: '2h', timeZone: 'Mars/Olympus' },
      { schedule: '61 2 * * 6', duration: '0m' },
    ],
    maintenanceWindowScope: 'Sometimes',
    disruptionBudget: { groupBy: [], maxUnavailable: '0%' },
  }));
  const seen = problems.map((p) => [p.object, p.field, p.rule]);
  assert.deepEqual(seen, [
    ['MachineConfigPool/edge', 'spec.maintenanceWindows[0].schedule', 'cron'],
    ['MachineConfigPool/edge', 'spec.maintenanceWindows[1].duration', 'duration'],
    ['MachineConfigPool/edge', 'spec.maintenanceWindows[2].timeZone', 'time-zone'],
    ['MachineConfigPool/edge', 'spec.maintenanceWindows[3].schedule', 'cron'],
    ['MachineConfigPool/edge', 'spec.maintenanceWindows[3].duration', 'duration'],
    ['MachineConfigPool/edge', 'spec.maintenanceWindowScope', 'window-scope'],
    ['MachineConfigPool/edge', 'spec.disruptionBudget.groupBy', 'required'],
    ['MachineConfigPool/edge', 'spec.disruptionBudget.maxUnavailable', 'max-unavailable'],
  ]);
  assert.match(problems[0]!.message, /not a valid five-field cron expression .*it has 4 fields, not 5/);
  assert.match(problems[2]!.message, /unknown time zone "Mars\/Olympus"/);
  assert.match(problems[1]!.message, /duration "two hours" must be/);
  const many = problemsOf(poolDoc('edge', { maintenanceWindows: Array.from({ length: 21 }, () => ({ schedule: '0 2 * * *', duration: '1h' })) }));
  assert.deepEqual(many.map((p) => [p.field, p.rule]), [['spec.maintenanceWindows', 'max-windows']]);
});

test('a pool\'s answer is kept until its next edge, and always equals a fresh one', () => {
  // Overlapping windows across Berlin's DST changes (spring: an hour skipped; autumn: 02:00-03:00
  // twice): asked every 31 minutes forward over a day and a half around each (the kept answer is
  // reused between edges), then back in time (it is not). A fresh answer costs croner 10 ms or so.
  const windows: MaintenanceWindow[] = [
    { schedule: '0 1 * * *', duration: '2h', timeZone: 'Europe/Berlin' },
    { schedule: '30 2 * * 0', duration: '3h', timeZone: 'Europe/Berlin' },
    { schedule: '*/45 4 * * *', duration: '40m', timeZone: 'UTC' },
  ];
  for (const start of [at('2026-03-28T18:00:00Z'), at('2026-10-24T18:00:00Z')]) {
    const times = Array.from({ length: (36 * 60) / 31 }, (_, i) => start + i * 31 * 60_000);
    for (const now of [...times, ...times.filter((_, i) => i % 5 === 0).reverse()]) {
      const fresh = windowState(windows.map((w) => ({ ...w })), now);
      assert.deepEqual(windowState(windows, now), fresh, new Date(now).toISOString());
    }
  }
});

test('a window is open from each start for its duration, in its own time zone, across a DST change', () => {
  // Europe/Berlin leaves CET (UTC+1) for CEST (UTC+2) on 2026-03-29 at 02:00 local.
  const windows = [{ schedule: '0 1 * * *', duration: '2h', timeZone: 'Europe/Berlin' }];
  // Saturday 01:00 CET is 00:00Z; Sunday 01:00 CET is still 00:00Z, Monday 01:00 CEST is 23:00Z Sunday.
  assert.deepEqual(windowState(windows, at('2026-03-28T00:30:00Z')), { open: true, openedAt: at('2026-03-28T00:00:00Z'), closesAt: at('2026-03-28T02:00:00Z'), nextStart: at('2026-03-29T00:00:00Z') });
  // The Sunday window spans the skipped hour; its duration is real time: 00:00Z to 02:00Z.
  assert.deepEqual(windowState(windows, at('2026-03-29T01:30:00Z')), { open: true, openedAt: at('2026-03-29T00:00:00Z'), closesAt: at('2026-03-29T02:00:00Z'), nextStart: at('2026-03-29T23:00:00Z') });
  const after = windowState(windows, at('2026-03-29T12:00:00Z'));
  assert.equal(after.open, false);
  assert.equal(after.nextStart, at('2026-03-29T23:00:00Z'), 'after the change, 01:00 Berlin is 23:00Z the day before');
  // A start inside the skipped hour moves to the first valid time (03:00 CEST = 01:00Z).
  assert.equal(windowState([{ schedule: '30 2 * * *', duration: '1h', timeZone: 'Europe/Berlin' }], at('2026-03-28T12:00:00Z')).nextStart, at('2026-03-29T01:00:00Z'));
  assert.equal(formatWait(5 * 3600_000 + 20 * 60_000), '5h');
  assert.equal(formatWait(90 * 60_000), '1h30m');
  assert.equal(formatWait(26 * 3600_000), '1d2h');
});

test('drains and reboots wait for the window; other updates go at once unless the scope is All', () => {
  const windows = [{ schedule: '0 2 * * *', duration: '2h', timeZone: 'UTC' }];
  const nodes = ['a', 'b', 'c'].map((n, i) => nodeRecord(n, { registeredAt: i }));
  const acts = actions({ a: 'reboot', b: 'restart', c: 'drain' });
  const closed = at('2026-11-22T10:00:00Z');
  const pool = worker({ maxUnavailable: 3, maintenanceWindows: windows });
  const d = decideRollout(pool, 'new', nodes, { now: closed, actionOf: acts });
  assert.deepEqual(d.assign, ['b']);
  assert.deepEqual(d.heldForWindow, ['a', 'c']);
  assert.equal(d.nextWindowStart, at('2026-11-23T02:00:00Z'));
  assert.deepEqual(decideRollout(pool, 'new', nodes, { now: at('2026-11-23T02:30:00Z'), actionOf: acts }).assign, ['a', 'b', 'c']);
  const all = worker({ maxUnavailable: 3, maintenanceWindows: windows, maintenanceWindowScope: 'All' });
  assert.deepEqual(decideRollout(all, 'new', nodes, { now: closed, actionOf: acts }).assign, []);
  // An update whose cost is unknown counts as a reboot.
  assert.deepEqual(decideRollout(pool, 'new', nodes, { now: closed }).heldForWindow, ['a', 'b', 'c']);

  // The pool says it waits, when, and how long until then.
  const status = computePoolStatus({ pool, target: 'new', targetSources: [], nodes: nodes.map((n) => ({ ...n, desiredConfig: n.name === 'b' ? 'new' : 'old', status: { ...n.status, currentConfig: n.name === 'b' ? 'new' : 'old' } })), now: closed, rollout: d });
  const updating = conditionOf(status, 'Updating')!;
  assert.equal(updating.status, 'False');
  assert.equal(updating.reason, 'WaitingForMaintenanceWindow');
  assert.equal(updating.message, '1 of 3 nodes updated to new; 2 nodes wait for the next maintenance window to drain or reboot (a, c): it opens at 2026-11-23T02:00Z, in 16h');
  assert.equal(status.maintenanceWindow, 'next 2026-11-23T02:00Z (in 16h)');
});

test('a disruption budget per group: at most so many unavailable per rack, a node without the label in group ""', () => {
  const rack = (r: string | undefined): Record<string, string> => (r === undefined ? { 'node-role.kubernetes.io/worker': '' } : { 'node-role.kubernetes.io/worker': '', rack: r });
  const nodes = [
    nodeRecord('r1-a', { labels: rack('r1'), registeredAt: 1 }),
    nodeRecord('r1-b', { labels: rack('r1'), registeredAt: 2 }),
    nodeRecord('r2-a', { labels: rack('r2'), registeredAt: 3 }),
    nodeRecord('r2-b', { labels: rack('r2'), registeredAt: 4 }),
    nodeRecord('x-a', { labels: rack(undefined), registeredAt: 5 }),
    nodeRecord('x-b', { labels: rack(undefined), registeredAt: 6 }),
  ];
  const pool = worker({ maxUnavailable: 10, disruptionBudget: { groupBy: ['rack'], maxUnavailable: 1 } });
  const d = decideRollout(pool, 'new', nodes, { now: 0 });
  assert.deepEqual(d.assign, ['r1-a', 'r2-a', 'x-a']);
  assert.deepEqual(d.heldByGroupBudget, ['r1-b', 'r2-b', 'x-b']);
  // A node already updating uses its group's budget.
  const busy = nodes.map((n) => (n.name === 'r2-b' ? { ...n, desiredConfig: 'new' } : n));
  assert.deepEqual(decideRollout(pool, 'new', busy, { now: 0 }).assign, ['r1-a', 'x-a']);
  // Percentages are of the group's size; the pool's own maxUnavailable still applies.
  const half = worker({ maxUnavailable: 2, disruptionBudget: { groupBy: ['rack'], maxUnavailable: '50%' } });
  assert.deepEqual(decideRollout(half, 'new', nodes, { now: 0 }).assign, ['r1-a', 'r2-a']);
  // The preview replays the same rules batch by batch.
  const schedule = previewRollout(pool, 'new', nodes, { now: 0 });
  assert.deepEqual(schedule.map((s) => [s.node, s.batch, s.order]), [['r1-a', 1, 1], ['r1-b', 2, 2], ['r2-a', 1, 3], ['r2-b', 2, 4], ['x-a', 1, 5], ['x-b', 2, 6]]);
});

test('the preview puts held drains and reboots in the batch that starts with the window', () => {
  const pool = worker({ maxUnavailable: 1, maintenanceWindows: [{ schedule: '0 2 * * 6', duration: '4h', timeZone: 'UTC' }] });
  const nodes = ['a', 'b', 'c'].map((n, i) => nodeRecord(n, { registeredAt: i }));
  const now = at('2026-11-22T10:00:00Z'); // a Sunday
  const s = previewRollout(pool, 'new', nodes, { now, actionOf: actions({ a: 'reboot', b: 'none', c: 'reboot' }) });
  assert.deepEqual(s.map((x) => [x.node, x.batch, x.startsAt, x.window?.start]), [
    ['a', 2, at('2026-11-28T02:00:00Z'), at('2026-11-28T02:00:00Z')],
    ['b', 1, now, undefined],
    ['c', 3, at('2026-11-28T02:00:00Z'), at('2026-11-28T02:00:00Z')],
  ]);
});

test('with the time a batch takes, batches that no longer fit in a window wait for the next one', () => {
  const pool = worker({ maxUnavailable: 1, maintenanceWindows: [{ schedule: '0 2 * * 6', duration: '1h', timeZone: 'UTC' }] });
  const nodes = ['a', 'b', 'c'].map((n, i) => nodeRecord(n, { registeredAt: i }));
  const now = at('2026-11-22T10:00:00Z'); // a Sunday
  const s = previewRollout(pool, 'new', nodes, { now, actionOf: actions({ a: 'reboot', b: 'reboot', c: 'reboot' }) }, 40 * 60_000);
  assert.deepEqual(s.map((x) => [x.node, x.batch, new Date(x.startsAt).toISOString(), x.window && new Date(x.window.start!).toISOString()]), [
    ['a', 1, '2026-11-28T02:00:00.000Z', '2026-11-28T02:00:00.000Z'],
    ['b', 2, '2026-11-28T02:40:00.000Z', '2026-11-28T02:00:00.000Z'],
    ['c', 3, '2026-12-05T02:00:00.000Z', '2026-12-05T02:00:00.000Z'],
  ]);
  // Without it every batch lands in the first window, as before.
  assert.deepEqual(previewRollout(pool, 'new', nodes, { now, actionOf: actions({ a: 'reboot', b: 'reboot', c: 'reboot' }) }).map((x) => x.startsAt), Array(3).fill(at('2026-11-28T02:00:00Z')));
  // A window open now is "open until", for the batches it takes.
  const inWindow = previewRollout(pool, 'new', nodes, { now: at('2026-11-28T02:10:00Z'), actionOf: actions({ a: 'reboot', b: 'reboot', c: 'reboot' }) }, 40 * 60_000);
  assert.deepEqual(inWindow.map((x) => [x.batch, x.window]), [
    [1, { open: true, closesAt: at('2026-11-28T03:00:00Z') }],
    [2, { open: true, closesAt: at('2026-11-28T03:00:00Z') }],
    [3, { open: false, start: at('2026-12-05T02:00:00Z'), closesAt: at('2026-12-05T03:00:00Z') }],
  ]);
});
