import assert from 'node:assert/strict';
import { test } from 'node:test';
import { appendToHistory, boundNodeStatus, boundUpdateRecord, enterPhase, finishUpdate, MAX_HISTORY_UPDATES, startUpdate, typicalUpdate, withPhase, type NodeStatus, type UpdateRecord } from '../../src/machineconfig/index.ts';

test('phases: entering one ends the one running; the same phase again changes nothing; finishing ends the last', () => {
  const r = startUpdate('u1', 'rendered-a', 'rendered-b', 100);
  assert.equal(enterPhase(r, 'check', 100), true);
  assert.equal(enterPhase(r, 'check', 105), false);
  enterPhase(r, 'apply', 110);
  const done = finishUpdate(r, 'Done', '', 150);
  assert.deepEqual(done.phases.map((p) => [p.name, p.startedUnixMs, p.endedUnixMs]), [['check', 100, 110], ['apply', 110, 150]]);
  assert.equal(done.endedUnixMs, 150);
  assert.equal(done.result, 'Done');
});

test('a control-plane phase (a drain) joins the agent\'s record in time order', () => {
  const r = startUpdate('u1', 'a', 'b', 200);
  enterPhase(r, 'check', 200);
  const merged = withPhase(r, { name: 'drain', startedUnixMs: 150, endedUnixMs: 190, source: 'control-plane' });
  assert.deepEqual(merged.phases.map((p) => p.name), ['drain', 'check']);
  assert.equal(merged.startedUnixMs, 150);
});

test('the history keeps the last MAX_HISTORY_UPDATES, oldest first, one per id', () => {
  let h = appendToHistory([], { ...startUpdate('x', '', 'a', 1), result: 'Done' });
  for (let i = 2; i < 30; i++) h = appendToHistory(h, { ...startUpdate(`u${i}`, '', 'a', i), result: 'Done' });
  h = appendToHistory(h, { ...startUpdate('u29', '', 'a', 29), result: 'Degraded' });
  assert.equal(h.length, MAX_HISTORY_UPDATES);
  assert.equal(h[0]!.id, 'u10');
  assert.equal(h.at(-1)!.result, 'Degraded');
});

test('what an agent sends is bounded and typed: unusable records are dropped, wrong fields emptied', () => {
  assert.equal(boundUpdateRecord({ id: '' }), null);
  assert.equal(boundUpdateRecord('nonsense'), null);
  const r = boundUpdateRecord({ id: 'u', result: 'Exploded', reason: 'r'.repeat(10_000), startedUnixMs: -5, phases: [...Array.from({ length: 100 }, (_, i) => ({ name: `p${i}`, startedUnixMs: i })), { name: 7 }], fromConfig: 42 })!;
  assert.equal(r.result, '');
  assert.ok(r.reason.length <= 4096);
  assert.equal(r.startedUnixMs, 0);
  assert.equal(r.fromConfig, '');
  assert.ok(r.phases.length <= 32 && r.phases.every((p) => typeof p.name === 'string' && p.name !== ''));
  const status = boundNodeStatus({ currentConfig: '', desiredConfig: '', state: 'Done', phase: '', reason: '', drift: [], os: null, bootId: '', agentVersion: '', lastDisruption: '', lastUpdate: { ...startUpdate('u', '', 'a', 1), result: 'Done' } } satisfies NodeStatus);
  assert.equal(status.lastUpdate?.id, 'u');
  assert.equal('currentUpdate' in status, false, 'an agent that sends no record gets none added');
});

test('a typical update is the median of the Done ones of the kind asked for; implausible records are not believed', () => {
  const u = (ms: number, disruption: string, result = 'Done', start = 1_000_000) => ({ id: 'x', fromConfig: 'a', toConfig: 'b', startedUnixMs: start, endedUnixMs: start + ms, phases: [], disruption, result, reason: '' }) as UpdateRecord;
  const updates = [u(40_000, 'reboot: karg'), u(60_000, 'reboot: image'), u(50_000, 'reboot: file'), u(1_000, 'restart chronyd.service'), u(999, 'reboot: x', 'Degraded')];
  assert.deepEqual(typicalUpdate(updates, true), { ms: 50_000, samples: 3, rebooting: true });
  assert.deepEqual(typicalUpdate(updates, false), { ms: 1_000, samples: 1, rebooting: false });
  assert.deepEqual(typicalUpdate([u(10_000, 'none'), u(20_000, 'none')], true), { ms: 15_000, samples: 2, rebooting: 'any' });
  // No start, a record lasting longer than a week: an agent's error or a forged report, skipped.
  assert.equal(typicalUpdate([u(5_000, 'reboot: x', 'Done', 0), u(8 * 24 * 3600_000, 'reboot: x'), u(1e20, 'reboot: x')], true), undefined);
  assert.equal(typicalUpdate([], true), undefined);
});
