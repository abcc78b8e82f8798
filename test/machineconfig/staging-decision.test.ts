// Staging before the drain, the pure rules (staging.ts, rollout.ts): a node is disrupted only
// once staged and takes no budget until then; maxStaging bounds the downloads; downloadWindows
// hold new ones; the pool fields are checked with their rules.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decideRollout, defaultPools, needsStaging, type MachineConfigPool, type MachineConfigSpec, type NodeRecord } from '../../src/machineconfig/index.ts';
import { parseValid, poolDoc, problemsOf } from '../helpers/manifests.ts';
import { nodeRecord } from '../helpers/nodes.ts';

const pool = (spec: Partial<MachineConfigPool['spec']> = {}): MachineConfigPool => {
  const p = structuredClone(defaultPools()[1]!);
  Object.assign(p.spec, { maxUnavailable: 1 }, spec);
  return p;
};
const nodes = (): NodeRecord[] => ['n1', 'n2', 'n3', 'n4'].map((n, i) => nodeRecord(n, { registeredAt: i }));
const gate = (staged: string[], requested: string[] = []) => ({
  ready: (n: NodeRecord) => staged.includes(n.name),
  requested: (n: NodeRecord) => requested.includes(n.name),
});

test('a node not staged takes no budget: the next staged node in order goes; the rest are asked to stage', () => {
  const all = nodes();
  const none = decideRollout(pool(), 'new', all, { now: 0, staging: gate([]) });
  assert.deepEqual(none.assign, [], 'nobody disrupted before staging');
  assert.deepEqual(none.awaitingStage, ['n1', 'n2', 'n3', 'n4'], 'each waits for its download; none holds budget meanwhile');
  assert.deepEqual(none.stage, ['n1', 'n2', 'n3', 'n4'], 'without maxStaging every node the rollout will reach downloads');
  const second = decideRollout(pool(), 'new', all, { now: 0, staging: gate(['n2'], ['n1', 'n2', 'n3', 'n4']) });
  assert.deepEqual(second.assign, ['n2'], 'the staged node goes ahead of one still downloading');
  assert.deepEqual(second.stage, []);
  assert.equal(second.downloading, 3);
  // Without staging (the pool's switch off: no gate) the old rule holds.
  assert.deepEqual(decideRollout(pool(), 'new', all, { now: 0 }).assign, ['n1']);
});

test('maxStaging bounds the nodes downloading at once, a count or a percentage', () => {
  const all = nodes();
  assert.deepEqual(decideRollout(pool({ rollout: { maxFailures: 0, onFailure: 'Pause', maxStaging: 2 } }), 'new', all, { now: 0, staging: gate([]) }).stage, ['n1', 'n2']);
  assert.deepEqual(decideRollout(pool({ rollout: { maxFailures: 0, onFailure: 'Pause', maxStaging: 2 } }), 'new', all, { now: 0, staging: gate([], ['n1']) }).stage, ['n2']);
  assert.deepEqual(decideRollout(pool({ rollout: { maxFailures: 0, onFailure: 'Pause', maxStaging: 2 } }), 'new', all, { now: 0, staging: gate([], ['n1', 'n2']) }).stage, []);
  assert.deepEqual(decideRollout(pool({ rollout: { maxFailures: 0, onFailure: 'Pause', maxStaging: '25%' } }), 'new', all, { now: 0, staging: gate([]) }).stage, ['n1']);
  // A staged node no longer downloads: its slot goes to the next.
  assert.deepEqual(decideRollout(pool({ maxUnavailable: 0, rollout: { maxFailures: 0, onFailure: 'Pause', maxStaging: 1 } }), 'new', all, { now: 0, staging: gate(['n1'], ['n1']) }).stage, ['n2']);
});

test('downloadWindows hold new downloads while closed and say when the next opens', () => {
  const all = nodes();
  const p = pool({ downloadWindows: [{ schedule: '0 22 * * *', duration: '6h', timeZone: 'UTC' }] });
  const noon = Date.parse('2026-11-25T12:00:00Z');
  const closed = decideRollout(p, 'new', all, { now: noon, staging: gate([]) });
  assert.deepEqual(closed.stage, []);
  assert.equal(closed.nextDownloadWindowStart, Date.parse('2026-11-25T22:00:00Z'));
  assert.deepEqual(decideRollout(p, 'new', all, { now: Date.parse('2026-11-25T23:00:00Z'), staging: gate([]) }).stage, ['n1', 'n2', 'n3', 'n4']);
});

test('which updates download: a new image, a kernel type other than default, an added extension', () => {
  const spec = (s: Partial<MachineConfigSpec>): MachineConfigSpec => ({ osImageURL: '', kernelType: 'default', extensions: [], ...s }) as MachineConfigSpec;
  assert.equal(needsStaging(spec({}), spec({ osImageURL: 'q/os:2' })), true);
  assert.equal(needsStaging(spec({ osImageURL: 'q/os:2' }), spec({ osImageURL: 'q/os:2' })), false);
  assert.equal(needsStaging(spec({}), spec({ kernelType: 'realtime' })), true);
  assert.equal(needsStaging(spec({ kernelType: 'realtime' }), spec({})), false, 'back to the default kernel: the base image has it');
  assert.equal(needsStaging(spec({}), spec({ extensions: ['usbguard'] })), true);
  assert.equal(needsStaging(spec({ extensions: ['usbguard'] }), spec({})), false);
});

test('the pool fields: staging, maxStaging and downloadWindows are checked with their rules', () => {
  const base = { machineConfigSelector: {}, nodeSelector: { matchLabels: { a: 'b' } } };
  const { pools } = parseValid(poolDoc('web', { ...base, rollout: { staging: 'Disabled', maxStaging: '50%' }, downloadWindows: [{ schedule: '0 22 * * *', duration: '6h' }] }));
  assert.equal(pools[0]!.spec.rollout!.staging, 'Disabled');
  assert.equal(pools[0]!.spec.rollout!.maxStaging, '50%');
  assert.deepEqual(pools[0]!.spec.downloadWindows, [{ schedule: '0 22 * * *', duration: '6h', timeZone: 'UTC' }]);
  const problems = problemsOf(poolDoc('web', { ...base, rollout: { staging: 'Sometimes', maxStaging: 0 }, downloadWindows: [{ schedule: 'nightly', duration: '6h' }] }));
  assert.deepEqual(problems.map((p) => `${p.object} ${p.field} ${p.rule}`).sort(), [
    'MachineConfigPool/web spec.downloadWindows[0].schedule cron',
    'MachineConfigPool/web spec.rollout.maxStaging max-staging',
    'MachineConfigPool/web spec.rollout.staging staging',
  ]);
  assert.match(problems.find((p) => p.field === 'spec.rollout.maxStaging')!.message, /whole number of nodes \(1 or more\) or a percentage from 1% to 100%, got 0/);
});

test('a node that could not stage the target makes the pool Degraded (StagingDegraded) naming the node and the cause; the node itself stays Done', async () => {
  const { computePoolStatus } = await import('../../src/machineconfig/index.ts');
  const all = nodes();
  all[1]!.status.staging = { config: 'new', state: 'Failed', bytesDone: 0, bytesTotal: 0, reason: 'stage: image q/os:2: manifest unknown; retry 1 in 10s', startedUnixMs: 1, endedUnixMs: 2 };
  const status = computePoolStatus({ pool: pool(), target: 'new', nodes: all, targetSources: [] } as never);
  const staging = status.conditions.find((c) => c.type === 'StagingDegraded');
  assert.equal(staging?.status, 'True');
  assert.equal(staging?.message, '1 node could not stage new and keeps serving on its config: n2 (stage: image q/os:2: manifest unknown; retry 1 in 10s)');
  assert.equal(status.conditions.find((c) => c.type === 'Degraded')?.status, 'True');
  assert.equal(status.conditions.find((c) => c.type === 'NodeDegraded')?.status, 'False', 'no node is Degraded itself');
  all[1]!.status.staging = { ...all[1]!.status.staging!, state: 'Staged' };
  assert.equal(computePoolStatus({ pool: pool(), target: 'new', nodes: all, targetSources: [] } as never).conditions.find((c) => c.type === 'StagingDegraded'), undefined);
});
