// The MachineConfigNode builder: each condition MCO's daemon and drain controller would set,
// with the time mcplane recorded for that step, through an update with a drain and a reboot; the
// same records always give the same object; failures, pinned image sets, staging and the
// irreconcilable changes as MCO reports them.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildMachineConfigNode, irreconcilableChanges, machineConfigNodeObject, type MachineConfigNodeInput } from '../../src/machineconfig/machine-config-node.ts';
import { emptyIgnitionConfig } from '../../src/machineconfig/ignition.ts';
import type { Condition, MachineConfigSpec, NodeStatus } from '../../src/machineconfig/types.ts';
import type { UpdateRecord } from '../../src/machineconfig/update-record.ts';

const T0 = Date.parse('2026-11-29T08:00:00Z');
const s = (n: number): number => T0 + n * 1000;
const OLD = 'rendered-worker-aaaa';
const NEW = 'rendered-worker-bbbb';

function spec(patch: Partial<MachineConfigSpec> = {}): MachineConfigSpec {
  return { config: emptyIgnitionConfig(), kernelArguments: [], kernelType: 'default', fips: false, extensions: [], osImageURL: 'quay.io/os@sha256:1', baseOSExtensionsContainerImage: '', ...patch };
}

function status(patch: Partial<NodeStatus> = {}): NodeStatus {
  return { currentConfig: OLD, desiredConfig: OLD, state: 'Done', phase: 'done', reason: '', drift: [], os: null, bootId: 'b1', agentVersion: 'v', lastDisruption: '', ...patch };
}

/** The agent's record of an update that rebooted, up to `upTo` seconds (phases after it not yet begun). */
function rebootingUpdate(upTo: number): UpdateRecord {
  const phases = [
    { name: 'check', startedUnixMs: s(20), endedUnixMs: s(21), source: 'agent' as const },
    { name: 'diff', startedUnixMs: s(21), endedUnixMs: s(22), source: 'agent' as const },
    { name: 'plan', startedUnixMs: s(22), endedUnixMs: s(23), source: 'agent' as const },
    { name: 'apply', startedUnixMs: s(23), endedUnixMs: s(25), source: 'agent' as const },
    { name: 'reboot', startedUnixMs: s(25), endedUnixMs: s(40), source: 'agent' as const },
    { name: 'validate', startedUnixMs: s(40), endedUnixMs: s(41), source: 'agent' as const },
  ].filter((p) => p.startedUnixMs <= s(upTo)).map((p) => (p.endedUnixMs > s(upTo) ? { ...p, endedUnixMs: 0 } : p));
  const done = upTo >= 41;
  return { id: 'u2', fromConfig: OLD, toConfig: NEW, startedUnixMs: s(20), endedUnixMs: done ? s(41) : 0, phases, disruption: upTo >= 23 ? 'reboot: file /etc/chrony.conf added' : '', result: done ? 'Done' : '', reason: '' };
}

function input(patch: Partial<MachineConfigNodeInput>): MachineConfigNodeInput {
  return { name: 'host-a', pool: 'worker', registeredAt: T0, desiredConfig: NEW, status: status(), currentSpec: spec(), desiredSpec: spec(), ...patch };
}

const cond = (m: ReturnType<typeof buildMachineConfigNode>, type: string): Condition => {
  const c = m.status.conditions.find((x) => x.type === type);
  assert.ok(c, `condition ${type}`);
  return c;
};

test('a node never updated: every MCO condition, not yet occurred, since the node registered; Updated since then', () => {
  const m = buildMachineConfigNode(input({ desiredConfig: OLD }));
  assert.deepEqual(cond(m, 'Updated'), { type: 'Updated', status: 'True', reason: 'Updated', message: 'Node host-a Updated', lastTransitionTime: T0 });
  m.status.conditions = m.status.conditions.filter((c) => c.type !== 'Updated');
  assert.deepEqual(m.status.conditions.map((c) => c.type), [
    'UpdatePrepared', 'UpdateExecuted', 'UpdatePostActionComplete', 'UpdateComplete', 'Resumed', 'Drained', 'AppliedFilesAndOS',
    'Cordoned', 'RebootedNode', 'Uncordoned', 'NodeDegraded', 'PinnedImageSetsDegraded', 'PinnedImageSetsProgressing', 'Staged',
  ]);
  for (const c of m.status.conditions) {
    assert.deepEqual(c, { type: c.type, status: 'False', reason: 'NotYetOccurred', message: `This node has not yet entered the ${c.type} phase`, lastTransitionTime: T0 });
  }
  assert.deepEqual({ desired: m.desiredConfig, current: m.status.currentConfig, sdesired: m.status.desiredConfig }, { desired: OLD, current: OLD, sdesired: OLD });
});

test('during the drain: Updated False since the drain started, Cordoned True, Drained Unknown naming what it waits for', () => {
  const m = buildMachineConfigNode(input({ drain: { config: NEW, phase: 'Draining', startedAt: s(10), reason: 'draining: waiting for shop/web' } }));
  assert.deepEqual(cond(m, 'Updated'), { type: 'Updated', status: 'False', reason: 'Updated', message: 'Node host-a needs an update', lastTransitionTime: s(10) });
  assert.deepEqual(cond(m, 'Cordoned'), { type: 'Cordoned', status: 'True', reason: 'UpdateExecutedCordoned', message: 'Cordoned node. The node is reporting Unschedulable = true', lastTransitionTime: s(10) });
  const drained = cond(m, 'Drained');
  assert.equal(drained.status, 'Unknown');
  assert.equal(drained.reason, 'UpdateExecutedDrained');
  assert.match(drained.message, /^Draining node\..*waiting for shop\/web/);
  assert.deepEqual([cond(m, 'UpdateExecuted').status, cond(m, 'UpdateExecuted').reason], ['Unknown', 'Drained']);
  assert.equal(cond(m, 'UpdatePrepared').reason, 'NotYetOccurred');
});

test('waiting for the reboot: drained, prepared, files and OS applied, RebootedNode Unknown, each at its recorded time', () => {
  const drain = { config: NEW, phase: 'Drained' as const, startedAt: s(10), drainedAt: s(18), reason: 'drained' };
  const m = buildMachineConfigNode(input({ drain, status: status({ state: 'Working', phase: 'reboot', desiredConfig: NEW, currentUpdate: rebootingUpdate(30) }) }));
  assert.deepEqual([cond(m, 'Drained').status, cond(m, 'Drained').lastTransitionTime], ['True', s(18)]);
  assert.deepEqual(cond(m, 'UpdatePrepared'), { type: 'UpdatePrepared', status: 'True', reason: 'UpdatePrepared', message: 'Update Compatible. Post Cfg Actions: [reboot] Drain Required: true', lastTransitionTime: s(23) });
  assert.deepEqual(cond(m, 'AppliedFilesAndOS'), { type: 'AppliedFilesAndOS', status: 'True', reason: 'UpdateExecutedAppliedFilesAndOS', message: 'Applied files and new OS config to node. OS did not need an update. SSH Keys did not need an update', lastTransitionTime: s(25) });
  assert.deepEqual([cond(m, 'UpdateExecuted').status, cond(m, 'UpdateExecuted').lastTransitionTime], ['True', s(25)]);
  assert.deepEqual(cond(m, 'RebootedNode'), { type: 'RebootedNode', status: 'Unknown', reason: 'RebootedNode', message: 'Upgrade requires a reboot.', lastTransitionTime: s(25) });
  assert.equal(cond(m, 'Updated').status, 'False');
});

test('after the update and the uncordon: Updated True at the end, every other condition reset to False with MCO\'s message', () => {
  const history: UpdateRecord[] = [{ ...rebootingUpdate(41), phases: [{ name: 'drain', startedUnixMs: s(10), endedUnixMs: s(18), source: 'control-plane' }, ...rebootingUpdate(41).phases], startedUnixMs: s(10) }];
  const done = input({ history, status: status({ currentConfig: NEW, desiredConfig: NEW, lastUpdate: rebootingUpdate(41) }) });
  const m = buildMachineConfigNode(done);
  assert.deepEqual(cond(m, 'Updated'), { type: 'Updated', status: 'True', reason: 'Updated', message: 'Node host-a Updated', lastTransitionTime: s(41) });
  assert.deepEqual(cond(m, 'RebootedNode'), { type: 'RebootedNode', status: 'False', reason: 'RebootedNode', message: `Action during update to ${NEW}: Node has rebooted`, lastTransitionTime: s(41) });
  assert.deepEqual(cond(m, 'Uncordoned'), { type: 'Uncordoned', status: 'False', reason: 'UpdateCompleteUncordoned', message: `Action during update to ${NEW}: UnCordoned node. The node is reporting Unschedulable = false`, lastTransitionTime: s(41) });
  assert.deepEqual(cond(m, 'NodeDegraded'), { type: 'NodeDegraded', status: 'False', reason: 'NodeDegraded', message: 'Node host-a upgrade succeeded', lastTransitionTime: s(41) });
  // Never entered in this update: still as created.
  assert.equal(cond(m, 'UpdatePostActionComplete').reason, 'NotYetOccurred');
  assert.equal(m.status.observedGeneration, 2);
  // The same records, read again (or by another replica), give the same object.
  assert.deepEqual(buildMachineConfigNode(structuredClone(done)), m);
});

test('a new config assigned, not started yet: Updated False since the last recorded update ended', () => {
  const done = { ...rebootingUpdate(41), id: 'u1', fromConfig: 'rendered-worker-0000', toConfig: OLD };
  const m = buildMachineConfigNode(input({ status: status({ lastUpdate: done }) }));
  assert.deepEqual(cond(m, 'Updated'), { type: 'Updated', status: 'False', reason: 'Updated', message: 'Node host-a needs an update', lastTransitionTime: s(41) });
});

test('an uncordon still pending (the drain record is there, the agent Done): Updated stays False', () => {
  const drain = { config: NEW, phase: 'Drained' as const, startedAt: s(10), drainedAt: s(18), reason: 'drained' };
  const m = buildMachineConfigNode(input({ drain, status: status({ currentConfig: NEW, desiredConfig: NEW, lastUpdate: rebootingUpdate(41) }) }));
  assert.equal(cond(m, 'Updated').status, 'False');
  assert.equal(cond(m, 'Resumed').status, 'True');
  assert.equal(cond(m, 'Uncordoned').reason, 'NotYetOccurred');
});

test('an update without a reboot: Drain not required, UpdatePostActionComplete with reason None', () => {
  const u: UpdateRecord = {
    id: 'u3', fromConfig: OLD, toConfig: NEW, startedUnixMs: s(5), endedUnixMs: s(9), disruption: 'none', result: 'Done', reason: '',
    phases: ['check', 'diff', 'plan', 'apply', 'actions', 'validate'].map((name, i) => ({ name, startedUnixMs: s(5 + i * 0.5), endedUnixMs: s(5.5 + i * 0.5), source: 'agent' as const })),
  };
  const m = buildMachineConfigNode(input({ status: status({ currentConfig: OLD, state: 'Working', currentUpdate: { ...u, endedUnixMs: 0, result: '' } }) }));
  assert.deepEqual([cond(m, 'Drained').status, cond(m, 'Drained').message], ['False', 'Node Drain Not required for this update.']);
  assert.match(cond(m, 'UpdatePrepared').message, /Post Cfg Actions: \[none\] Drain Required: false$/);
  assert.deepEqual(cond(m, 'UpdatePostActionComplete'), { type: 'UpdatePostActionComplete', status: 'True', reason: 'None', message: 'Changes do not require a reboot', lastTransitionTime: s(7.5) });
});

test('a failed update: NodeDegraded True with the agent\'s reason; an unreconcilable one also UpdatePrepared Unknown', () => {
  const u = { ...rebootingUpdate(22), endedUnixMs: s(22), result: 'Unreconcilable' as const, reason: 'check: spec.fips: changing FIPS mode from false to true after install is not supported' };
  const m = buildMachineConfigNode(input({ status: status({ state: 'Unreconcilable', lastUpdate: u }), desiredSpec: spec({ fips: true }) }));
  assert.deepEqual(cond(m, 'NodeDegraded'), { type: 'NodeDegraded', status: 'True', reason: 'NodeDegraded', message: `Node host-a upgrade failure. ${u.reason}`, lastTransitionTime: s(22) });
  assert.equal(cond(m, 'UpdatePrepared').status, 'Unknown');
  assert.match(cond(m, 'UpdatePrepared').message, new RegExp(`^Update Failed compatibility validation\\. MachineConfigs ${OLD} and ${NEW} are not compatible\\. Err: check: spec\\.fips`));
  assert.deepEqual(m.status.irreconcilableChanges, [{ fieldPath: 'spec.fips', diff: '- false\n+ true\n' }]);
});

test('a try that reverted (try mode): NodeDegraded True naming the revert, as for a rollback', () => {
  const u = { ...rebootingUpdate(41), result: 'TryReverted' as const, reason: 'try: check tcp 10.0.0.1:6443 failed: connect ECONNREFUSED' };
  const m = buildMachineConfigNode(input({ status: status({ state: 'TryReverted', lastUpdate: u }) }));
  assert.deepEqual(cond(m, 'NodeDegraded'), { type: 'NodeDegraded', status: 'True', reason: 'NodeDegraded', message: `Node host-a upgrade failure. tried and reverted: ${u.reason}`, lastTransitionTime: s(41) });
});

test('irreconcilable changes: each storage directory and link element that differs, with MCO\'s field path and diff', () => {
  const from = spec();
  from.config.storage.directories = [{ path: '/var/a', mode: 493 } as never];
  const to = spec();
  to.config.storage.directories = [{ path: '/var/b', mode: 493 } as never];
  to.config.storage.links = [{ path: '/etc/l', target: '/var/b' } as never];
  assert.deepEqual(irreconcilableChanges(from, to), [
    { fieldPath: 'spec.config.storage.directories[0]', diff: '- {"path":"/var/a","mode":493}\n+ {"path":"/var/b","mode":493}\n' },
    { fieldPath: 'spec.config.storage.links[0]', diff: '+ {"path":"/etc/l","target":"/var/b"}\n' },
  ]);
  // Removing every link is allowed (the agent's rule): nothing to report.
  assert.deepEqual(irreconcilableChanges(to, { ...to, config: { ...to.config, storage: { ...to.config.storage, links: [] } } }), []);
});

test('pinned image sets, a failing one: PinnedImageSetsDegraded True at the failure, MCO\'s per-set fields', () => {
  const m = buildMachineConfigNode(input({ desiredConfig: OLD, status: status({ pinnedImageSets: [
    { name: 'ok', desiredGeneration: 2, currentGeneration: 2, imagesDone: 3, imagesTotal: 3, lastFailedImage: '', lastFailureReason: '', lastFailureUnixMs: 0 },
    { name: 'bad', desiredGeneration: 3, currentGeneration: 0, imagesDone: 0, imagesTotal: 1, lastFailedImage: 'quay.io/x@sha256:ab', lastFailureReason: 'not found', lastFailureUnixMs: s(7) },
  ] }) }));
  assert.deepEqual(m.status.pinnedImageSets, [
    { name: 'ok', desiredGeneration: 2, currentGeneration: 2 },
    { name: 'bad', desiredGeneration: 3, lastFailedGeneration: 3, lastFailedGenerationError: 'quay.io/x@sha256:ab: not found' },
  ]);
  assert.deepEqual(cond(m, 'PinnedImageSetsDegraded'), { type: 'PinnedImageSetsDegraded', status: 'True', reason: 'PrefetchFailed', message: 'One or more PinnedImageSet is experiencing an error. See PinnedImageSet list for more details.', lastTransitionTime: s(7) });
  assert.equal(cond(m, 'PinnedImageSetsProgressing').status, 'False');
});

test('staging: Staged Unknown while it downloads, True when done, at the staging record\'s times', () => {
  const staging = { config: NEW, state: 'Staging' as const, bytesDone: 10, bytesTotal: 100, reason: '', startedUnixMs: s(3), endedUnixMs: 0 };
  const running = buildMachineConfigNode(input({ status: status({ staging }) }));
  assert.deepEqual([cond(running, 'Staged').status, cond(running, 'Staged').reason, cond(running, 'Staged').lastTransitionTime], ['Unknown', 'Staging', s(3)]);
  const staged = buildMachineConfigNode(input({ status: status({ staging: { ...staging, state: 'Staged', bytesDone: 100, endedUnixMs: s(6) } }) }));
  assert.deepEqual([cond(staged, 'Staged').status, cond(staged, 'Staged').lastTransitionTime], ['True', s(6)]);
});

test('the Kubernetes object: MCO\'s apiVersion, kind, metadata.name = node name, spec and status, RFC 3339 times', () => {
  const o = machineConfigNodeObject(buildMachineConfigNode(input({ desiredConfig: OLD }))) as { apiVersion: string; kind: string; metadata: { name: string }; spec: unknown; status: { conditions: { lastTransitionTime: string }[]; configVersion: unknown } };
  assert.equal(o.apiVersion, 'machineconfiguration.openshift.io/v1');
  assert.equal(o.kind, 'MachineConfigNode');
  assert.equal(o.metadata.name, 'host-a');
  assert.deepEqual(o.spec, { configVersion: { desired: OLD }, node: { name: 'host-a' }, pool: { name: 'worker' } });
  assert.deepEqual(o.status.configVersion, { current: OLD, desired: OLD });
  assert.equal(o.status.conditions[0]!.lastTransitionTime, '2026-11-29T08:00:00Z');
});
