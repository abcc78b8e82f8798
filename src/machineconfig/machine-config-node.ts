// MCO's MachineConfigNode (machineconfiguration.openshift.io/v1, GA in OpenShift 4.19): the
// per-node update status OpenShift tooling reads, built from what the control plane already
// keeps (the node's record and its agent's status, the leader's drain record, the node's update
// history, the rendered configs). Nothing here is stored: the object is derived on every read,
// so its times must come from the records, never from the clock, or two reads would disagree.
//
// MCO's daemon and drain controller set the conditions one step at a time
// (pkg/upgrademonitor/upgrade_monitor.go, called from pkg/daemon/update.go, daemon.go, drain.go
// and pkg/controller/drain/drain_controller.go). mcplane has the same steps on record with their
// start and end times (an UpdateRecord's phases, the drain record), so the builder turns each
// recorded step into the call MCO would have made at that moment, in time order, and replays
// them with MCO's rules: a parent condition and an optional child, the first write of an object
// creates every condition as "NotYetOccurred", and Updated=True resets every condition that is
// not False to False with "Action during update to <config>: <message>".
//
// Times not on record, and what stands in for them (docs/operate/status-and-history.md says so too):
// - Uncordoned/UpdateComplete: the drain controller uncordons once the agent is Done and forgets
//   its drain record; the uncordon's own time is not kept: the update's end stands in.
// - Updated=False "needs an update" before the agent or the drain starts: the assignment's time
//   is not kept; the end of the node's last recorded update (or its registration) stands in.
// - Updated=True of a node on its config since it registered (no update on record): the
//   registration stands in for the daemon's first sync.
// - PinnedImageSetsProgressing/Degraded and Staged: where the agent's report has no time for the
//   transition (a pull's start, a set's completion), the object's creation (the node's
//   registration) stands in.

import { apiVersionOf, type ApiKind } from './api-kinds.ts';
import { day1StorageChange } from './config-diff.ts';
import { FAILED_NODE_STATES } from './node-availability.ts';
import type { Condition, ConditionStatus, MachineConfigSpec, NodeState, NodeStatus, PinnedImageSetStatus, StagingStatus } from './types.ts';
import type { UpdatePhase, UpdateRecord } from './update-record.ts';

export const MCN_KIND = 'MachineConfigNode' satisfies ApiKind;
export const MCN_API_VERSION = apiVersionOf(MCN_KIND);
/** MCO's placeholder for a config version it does not know yet (upgrademonitor.NotYetSet). */
export const NOT_YET_SET = 'not-yet-set';

/** The condition types, in the order MCO creates them (ImageModeStatusReporting off), then mcplane's Staged. */
export const MCN_CONDITION_TYPES = [
  'UpdatePrepared', 'UpdateExecuted', 'UpdatePostActionComplete', 'UpdateComplete', 'Resumed', 'Drained',
  'AppliedFilesAndOS', 'Cordoned', 'RebootedNode', 'Updated', 'Uncordoned', 'NodeDegraded',
  'PinnedImageSetsDegraded', 'PinnedImageSetsProgressing', 'Staged',
] as const;
export type McnConditionType = (typeof MCN_CONDITION_TYPES)[number];

/** MCO's limits (types_machineconfignode.go): irreconcilableChanges entries, fieldPath and diff lengths. */
const MAX_IRRECONCILABLE = 32;
const MAX_FIELD_PATH = 70;
const MAX_DIFF = 4096;

export interface McnPinnedImageSet {
  name: string;
  desiredGeneration?: number;
  currentGeneration?: number;
  lastFailedGeneration?: number;
  lastFailedGenerationError?: string;
}

export interface IrreconcilableChange {
  fieldPath: string;
  diff: string;
}

/** A MachineConfigNode with times in Unix ms (the wire's form); machineConfigNodeObject makes MCO's. */
export interface MachineConfigNode {
  name: string;
  pool: string;
  /** metadata.creationTimestamp: the node's registration. */
  creationTime: number;
  /** spec.configVersion.desired. */
  desiredConfig: string;
  status: {
    currentConfig: string;
    desiredConfig: string;
    observedGeneration: number;
    conditions: Condition[];
    pinnedImageSets: McnPinnedImageSet[];
    irreconcilableChanges: IrreconcilableChange[];
  };
}

/** What the leader's drain record says, as far as the MachineConfigNode needs it. */
export interface DrainFacts {
  config: string;
  phase: 'Draining' | 'Drained';
  startedAt: number;
  drainedAt?: number;
  reason: string;
}

export interface MachineConfigNodeInput {
  name: string;
  /** The node's primary pool ("" for none). */
  pool: string;
  registeredAt: number;
  /** The control plane's decision for the node ("" before the rollout gives it one). */
  desiredConfig: string;
  /** The agent's own report (not the displayed status: the drain comes from `drain`). */
  status: NodeStatus;
  drain?: DrainFacts | undefined;
  /** The control plane's history of the node (its drain phases joined), oldest first. */
  history?: readonly UpdateRecord[];
  /** The rendered specs of the node's current and desired configs, where they are still kept. */
  currentSpec?: MachineConfigSpec | undefined;
  desiredSpec?: MachineConfigSpec | undefined;
}

interface Step {
  at: number;
  parent: { type: McnConditionType; status: ConditionStatus; reason: string; message: string };
  child?: { type: McnConditionType; status: ConditionStatus; reason: string; message: string };
  /** spec.configVersion.desired when MCO made the call (the reset's message names it). */
  desired: string;
}

/** Builds the node's MachineConfigNode. Pure: the same records give the same object. */
export function buildMachineConfigNode(input: MachineConfigNodeInput): MachineConfigNode {
  const created = input.registeredAt;
  const conditions = new Map<string, Condition>();
  // MCO's first write creates every condition it knows, false, as not yet occurred.
  for (const type of MCN_CONDITION_TYPES) {
    conditions.set(type, { type, status: 'False', reason: 'NotYetOccurred', message: `This node has not yet entered the ${type} phase`, lastTransitionTime: created });
  }
  const updates = updatesOf(input);
  for (const step of updates.flatMap((u, i) => stepsOf(input, u, i === updates.length - 1))) apply(conditions, step);
  const newest = updates.at(-1);
  const s = input.status;
  if (!newest && input.desiredConfig && s.currentConfig === input.desiredConfig && s.state === 'Done') {
    // On its config since it registered (no update on record): MCO's daemon says Updated at its first sync.
    apply(conditions, { at: created, parent: { type: 'Updated', status: 'True', reason: 'Updated', message: `Node ${input.name} Updated` }, desired: input.desiredConfig });
  } else if (input.desiredConfig && s.currentConfig !== input.desiredConfig && newest?.toConfig !== input.desiredConfig) {
    // Assigned a config that neither the drain nor the agent has started on: the assignment's time
    // is not kept, so the last recorded time before it stands in.
    const since = Math.max(created, newest ? newest.endedUnixMs || newest.startedUnixMs : 0);
    apply(conditions, { at: since, parent: { type: 'Updated', status: 'False', reason: 'Updated', message: `Node ${input.name} needs an update` }, desired: input.desiredConfig });
  }
  setPinnedImageSetConditions(conditions, input.name, input.status.pinnedImageSets ?? [], created);
  setStagedCondition(conditions, input.status.staging ?? null, created);
  const desired = input.desiredConfig || NOT_YET_SET;
  const history = input.history ?? [];
  return {
    name: input.name,
    pool: input.pool,
    creationTime: created,
    desiredConfig: desired,
    status: {
      currentConfig: input.status.currentConfig,
      desiredConfig: desired,
      // A new desired config is a new spec: one generation per update on record (the history is
      // bounded, so this stops growing with it; it never goes down while the node exists).
      observedGeneration: 1 + history.length,
      conditions: MCN_CONDITION_TYPES.map((t) => conditions.get(t)!),
      pinnedImageSets: (input.status.pinnedImageSets ?? []).map(pinnedImageSetOf),
      irreconcilableChanges: input.desiredConfig && input.desiredConfig !== input.status.currentConfig && input.currentSpec && input.desiredSpec
        ? irreconcilableChanges(input.currentSpec, input.desiredSpec)
        : [],
    },
  };
}

/** MCO's generateAndApplyMachineConfigNodes, on conditions that all exist already. */
function apply(conditions: Map<string, Condition>, step: Step): void {
  const set = (c: Step['parent']): void => {
    const old = conditions.get(c.type)!;
    // The same condition again is no transition: its time stays (MCO returns early for an
    // unchanged parent; a repeated child would only move its time to "now").
    if (old.status === c.status && old.reason === c.reason && old.message === c.message) return;
    conditions.set(c.type, { ...c, lastTransitionTime: step.at });
  };
  const updated = conditions.get('Updated')!;
  if (updated.status === 'True' && step.parent.type !== 'Updated') {
    conditions.set('Updated', { type: 'Updated', status: 'False', reason: 'Updated', message: 'This node is not updated, sensed disruption via a manual update.', lastTransitionTime: step.at });
  }
  if (step.parent.type === 'Updated' && step.parent.status === 'True') {
    for (const [type, c] of conditions) {
      if (type === 'Updated' || c.status === 'False') continue;
      conditions.set(type, { ...c, status: 'False', message: `Action during update to ${step.desired}: ${c.message}`, lastTransitionTime: step.at });
    }
  }
  if (step.child) set(step.child);
  set(step.parent);
}

/**
 * The node's updates, oldest first: the control plane's history (which has the leader's drain
 * phases) joined with the agent's last and running updates (which may be newer than the history),
 * and a drain under way that the agent has not started an update for yet.
 */
function updatesOf(input: MachineConfigNodeInput): UpdateRecord[] {
  const byId = new Map<string, UpdateRecord>();
  for (const u of input.history ?? []) byId.set(u.id, u);
  for (const u of [input.status.lastUpdate, input.status.currentUpdate]) {
    if (!u) continue;
    const kept = byId.get(u.id);
    const controlPlane = kept?.phases.filter((p) => p.source === 'control-plane') ?? [];
    byId.set(u.id, controlPlane.reduce(joinPhase, u));
  }
  const updates = [...byId.values()].sort((a, b) => a.startedUnixMs - b.startedUnixMs);
  const d = input.drain;
  if (d) {
    const phase: UpdatePhase = { name: 'drain', startedUnixMs: d.startedAt, endedUnixMs: d.drainedAt ?? 0, source: 'control-plane' };
    const running = updates.findLast((u) => u.toConfig === d.config && u.endedUnixMs === 0) ?? (d.config !== input.status.currentConfig ? undefined : updates.findLast((u) => u.toConfig === d.config));
    if (running) updates[updates.indexOf(running)] = joinPhase(running, phase);
    else updates.push({ id: `drain-${d.config}`, fromConfig: input.status.currentConfig, toConfig: d.config, startedUnixMs: d.startedAt, endedUnixMs: 0, phases: [phase], disruption: '', result: '', reason: '' });
  }
  return updates;
}

function joinPhase(record: UpdateRecord, phase: UpdatePhase): UpdateRecord {
  const phases = [...record.phases.filter((p) => !(p.name === phase.name && p.source === phase.source)), phase].sort((a, b) => a.startedUnixMs - b.startedUnixMs);
  return { ...record, phases, startedUnixMs: Math.min(record.startedUnixMs, phase.startedUnixMs) };
}


/** The calls MCO would have made during one update, with the times mcplane recorded for them. */
function stepsOf(input: MachineConfigNodeInput, u: UpdateRecord, newest: boolean): Step[] {
  const steps: Step[] = [];
  const name = input.name;
  const to = u.toConfig;
  const at = (t: number, parent: Step['parent'], child?: Step['child']): void => {
    if (t > 0) steps.push({ at: t, parent, desired: to, ...(child ? { child } : {}) });
  };
  const first = (n: string) => u.phases.find((p) => p.name === n);
  const last = (n: string) => u.phases.findLast((p) => p.name === n);
  const drain = last('drain');
  const plan = last('plan');
  const apply = first('apply');
  const applyEnd = last('apply');
  const reboot = first('reboot');
  const rebootEnd = last('reboot');
  const actions = last('actions');
  // A running update's failure is in the agent's status, not yet in the record.
  const failedState = u.result && u.result !== 'Done' && u.result !== 'Superseded' ? u.result
    : newest && u.endedUnixMs === 0 && FAILED_NODE_STATES.has(input.status.state) ? input.status.state : '';
  const failReason = u.result ? u.reason : input.status.reason;
  // When a failure of a running update happened is not on record: its last recorded step's time.
  const failedAt = u.endedUnixMs || Math.max(0, ...u.phases.map((p) => p.endedUnixMs || p.startedUnixMs));
  const done = u.result === 'Done';

  at(u.startedUnixMs, { type: 'Updated', status: 'False', reason: 'Updated', message: `Node ${name} needs an update` });
  if (drain) {
    at(drain.startedUnixMs, { type: 'UpdateExecuted', status: 'Unknown', reason: 'Cordoned', message: 'Cordoned Node as part of update executed phase' },
      { type: 'Cordoned', status: 'True', reason: 'UpdateExecutedCordoned', message: 'Cordoned node. The node is reporting Unschedulable = true' });
    const live = input.drain && input.drain.config === to && input.drain.phase === 'Draining' ? `: ${input.drain.reason}` : '';
    at(drain.startedUnixMs, { type: 'UpdateExecuted', status: 'Unknown', reason: 'Drained', message: 'Draining Node as part of update executed phase' },
      { type: 'Drained', status: 'Unknown', reason: 'UpdateExecutedDrained', message: `Draining node. The drain will not be complete until every pod but DaemonSet and mirror pods has left the node${live}` });
    at(drain.endedUnixMs, { type: 'UpdateExecuted', status: 'Unknown', reason: 'Drained', message: 'Drained Node as part of update executed phase' },
      { type: 'Drained', status: 'True', reason: 'UpdateExecutedDrained', message: `Drained node. The drain for ${to} is complete` });
  }
  const actionsList = postConfigActions(u.disruption);
  if (plan?.endedUnixMs && actionsList !== undefined) {
    at(plan.endedUnixMs, { type: 'UpdatePrepared', status: 'True', reason: 'UpdatePrepared', message: `Update Compatible. Post Cfg Actions: [${actionsList}] Drain Required: ${drain !== undefined}` });
    if (!drain) {
      at(plan.endedUnixMs, { type: 'UpdateExecuted', status: 'Unknown', reason: 'Drained', message: 'Node Drain Not required for this update.' },
        { type: 'Drained', status: 'False', reason: 'UpdateExecutedDrained', message: 'Node Drain Not required for this update.' });
    }
  }
  const { os, ssh } = changesOf(input, u);
  if (apply) {
    at(apply.startedUnixMs, { type: 'UpdateExecuted', status: 'Unknown', reason: 'AppliedFilesAndOS', message: 'Updating the Files and OS on disk as a part of the in progress phase' },
      { type: 'AppliedFilesAndOS', status: 'Unknown', reason: 'UpdateExecutedAppliedFilesAndOS', message: `Applying files and new OS config to node. OS will ${os ? '' : 'not '}need an update. SSH Keys will ${ssh ? '' : 'not '}need an update` });
  }
  if (applyEnd?.endedUnixMs && (actions || reboot || done)) {
    at(applyEnd.endedUnixMs, { type: 'UpdateExecuted', status: 'True', reason: 'AppliedFilesAndOS', message: 'Updated the Files and OS on disk as a part of the in progress phase' },
      { type: 'AppliedFilesAndOS', status: 'True', reason: 'UpdateExecutedAppliedFilesAndOS', message: `Applied files and new OS config to node. OS did ${os ? '' : 'not '}need an update. SSH Keys did ${ssh ? '' : 'not '}need an update` });
  }
  if (reboot) {
    at(reboot.startedUnixMs, { type: 'RebootedNode', status: 'Unknown', reason: 'RebootedNode', message: 'Upgrade requires a reboot.' });
    if (rebootEnd?.endedUnixMs) at(rebootEnd.endedUnixMs, { type: 'RebootedNode', status: 'True', reason: 'RebootedNode', message: 'Node has rebooted' });
  } else if (actions?.endedUnixMs) {
    at(actions.endedUnixMs, u.disruption === 'none'
      ? { type: 'UpdatePostActionComplete', status: 'True', reason: 'None', message: 'Changes do not require a reboot' }
      : { type: 'UpdatePostActionComplete', status: 'True', reason: 'UpdatePostActionComplete', message: `Node has taken its post-config actions: ${u.disruption}` });
  }
  if (failedState) {
    if (failedState === 'Unreconcilable') {
      at(failedAt, { type: 'UpdatePrepared', status: 'Unknown', reason: 'UpdatePrepared', message: `Update Failed compatibility validation. MachineConfigs ${u.fromConfig || '<none>'} and ${to} are not compatible. Err: ${failReason}` });
    }
    at(failedAt, { type: 'NodeDegraded', status: 'True', reason: 'NodeDegraded', message: `Node ${name} upgrade failure. ${failedState === 'RolledBack' ? 'rolled back: ' : failedState === 'TryReverted' ? 'tried and reverted: ' : ''}${failReason}` });
    return steps;
  }
  if (!done) return steps;
  const end = u.endedUnixMs;
  at(end, { type: 'Resumed', status: 'True', reason: 'Resumed', message: `In desired config ${to}. Resumed normal operations.` });
  at(end, { type: 'NodeDegraded', status: 'False', reason: 'NodeDegraded', message: `Node ${name} upgrade succeeded` });
  // The drain controller uncordons after the Done report and then forgets its record: while the
  // record is there the uncordon has not happened yet.
  const uncordonPending = input.drain !== undefined && input.drain.config === to && newest;
  if (uncordonPending) return steps;
  if (drain) {
    at(end, { type: 'UpdateComplete', status: 'True', reason: 'Uncordoned', message: 'Uncordoned Node as part of completing upgrade phase' },
      { type: 'Uncordoned', status: 'True', reason: 'UpdateCompleteUncordoned', message: 'UnCordoned node. The node is reporting Unschedulable = false' });
  } else {
    at(end, { type: 'UpdateComplete', status: 'True', reason: 'UpdateComplete', message: 'Update complete; the node was not cordoned (no drain for this update)' });
  }
  at(end, { type: 'Updated', status: 'True', reason: 'Updated', message: `Node ${name} Updated` });
  return steps;
}

/** MCO's "Post Cfg Actions" list from the disruption the agent recorded; undefined before it is known. */
function postConfigActions(disruption: string): string | undefined {
  if (!disruption) return undefined;
  if (disruption.startsWith('reboot')) return 'reboot';
  return disruption;
}

/** Whether the update changed the OS (image, kernel, extensions) and the core user's SSH keys. */
function changesOf(input: MachineConfigNodeInput, u: UpdateRecord): { os: boolean; ssh: boolean } {
  const from = u.fromConfig === input.status.currentConfig || u.toConfig === input.desiredConfig ? input.currentSpec : undefined;
  const to = u.toConfig === input.desiredConfig ? input.desiredSpec : undefined;
  if (!from || !to || from === to) return { os: /^reboot/.test(u.disruption), ssh: false };
  const osOf = (s: MachineConfigSpec) => JSON.stringify([s.osImageURL, s.kernelArguments, s.kernelType, s.extensions, s.fips]);
  const keysOf = (s: MachineConfigSpec) => JSON.stringify(s.config.passwd.users.find((x) => x.name === 'core')?.sshAuthorizedKeys ?? []);
  return { os: osOf(from) !== osOf(to), ssh: keysOf(from) !== keysOf(to) };
}

function setPinnedImageSetConditions(conditions: Map<string, Condition>, node: string, sets: readonly PinnedImageSetStatus[], created: number): void {
  if (sets.length === 0) return;
  const failed = sets.filter((s) => s.lastFailureReason && s.currentGeneration < s.desiredGeneration);
  const pending = sets.filter((s) => s.currentGeneration < s.desiredGeneration);
  const failedAt = Math.max(0, ...failed.map((s) => s.lastFailureUnixMs)) || created;
  conditions.set('PinnedImageSetsDegraded', failed.length
    ? { type: 'PinnedImageSetsDegraded', status: 'True', reason: 'PrefetchFailed', message: 'One or more PinnedImageSet is experiencing an error. See PinnedImageSet list for more details.', lastTransitionTime: failedAt }
    : { type: 'PinnedImageSetsDegraded', status: 'False', reason: 'AsExpected', message: 'All is good', lastTransitionTime: created });
  // The agent's report has no time for a pull's start or a set's completion: creation stands in.
  conditions.set('PinnedImageSetsProgressing', pending.length && !failed.length
    ? { type: 'PinnedImageSetsProgressing', status: 'True', reason: 'ImagePrefetch', message: `node is prefetching images: ${node}`, lastTransitionTime: created }
    : { type: 'PinnedImageSetsProgressing', status: 'False', reason: 'AsExpected', message: pending.length ? `${pending.length} pinned image set(s) not complete` : 'All pinned image sets complete', lastTransitionTime: failed.length ? failedAt : created });
}

/** mcplane's Staged: the OS content of the next disruptive update downloaded before the drain. */
function setStagedCondition(conditions: Map<string, Condition>, staging: StagingStatus | null, created: number): void {
  if (!staging) return;
  const bytes = staging.bytesTotal ? `${staging.bytesDone} of ${staging.bytesTotal} bytes` : `${staging.bytesDone} bytes`;
  const c: Omit<Condition, 'type'> = staging.state === 'Staged'
    ? { status: 'True', reason: 'Staged', message: `Downloaded the OS content for ${staging.config} (${bytes}) before the drain`, lastTransitionTime: staging.endedUnixMs || created }
    : staging.state === 'Failed'
      ? { status: 'False', reason: 'StagingFailed', message: `Staging for ${staging.config} failed: ${staging.reason}`, lastTransitionTime: staging.endedUnixMs || staging.startedUnixMs || created }
      : { status: 'Unknown', reason: 'Staging', message: `Downloading the OS content for ${staging.config} before the drain: ${bytes}`, lastTransitionTime: staging.startedUnixMs || created };
  conditions.set('Staged', { type: 'Staged', ...c });
}

/** MCO's MachineConfigNodeStatusPinnedImageSet: generations only where they are set (omitempty, Minimum=1). */
function pinnedImageSetOf(s: PinnedImageSetStatus): McnPinnedImageSet {
  const out: McnPinnedImageSet = { name: s.name };
  if (s.desiredGeneration > 0) out.desiredGeneration = s.desiredGeneration;
  if (s.currentGeneration > 0) out.currentGeneration = s.currentGeneration;
  if (s.lastFailureReason && s.currentGeneration < s.desiredGeneration) {
    out.lastFailedGeneration = s.desiredGeneration;
    out.lastFailedGenerationError = (s.lastFailedImage ? `${s.lastFailedImage}: ${s.lastFailureReason}` : s.lastFailureReason).slice(0, 32768);
  }
  return out;
}

/**
 * The changes a running host cannot take, as MCO's irreconcilable-differences reporter lists them:
 * the field path in the rendered MachineConfig and a diff of "-" (current) and "+" (desired)
 * lines. mcplane refuses disks, filesystems, raid and luks when a MachineConfig is applied, so
 * what reaches a rendered config and cannot be taken is what the agent refuses as Unreconcilable
 * (config-diff.ts' day1StorageChange: storage directories and links; and FIPS mode).
 */
export function irreconcilableChanges(from: MachineConfigSpec, to: MachineConfigSpec): IrreconcilableChange[] {
  const out: IrreconcilableChange[] = [];
  if (from.fips !== to.fips) out.push(change('spec.fips', from.fips, to.fips));
  // The agent's rule (day1StorageChange), asked of each section alone so both are reported.
  const only = (s: MachineConfigSpec, key: 'directories' | 'links'): MachineConfigSpec =>
    ({ ...s, config: { ...s.config, storage: { ...s.config.storage, directories: key === 'directories' ? s.config.storage.directories ?? [] : [], links: key === 'links' ? s.config.storage.links ?? [] : [] } } });
  for (const key of ['directories', 'links'] as const) {
    if (!day1StorageChange(only(from, key), only(to, key))) continue;
    const a: unknown[] = from.config.storage[key] ?? [];
    const b: unknown[] = to.config.storage[key] ?? [];
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (JSON.stringify(a[i]) !== JSON.stringify(b[i])) out.push(change(`spec.config.storage.${key}[${i}]`, a[i], b[i]));
    }
  }
  return out.slice(0, MAX_IRRECONCILABLE).filter((c) => c.fieldPath.length <= MAX_FIELD_PATH);
}

function change(fieldPath: string, from: unknown, to: unknown): IrreconcilableChange {
  const lines = [...(from === undefined ? [] : [`- ${JSON.stringify(from)}`]), ...(to === undefined ? [] : [`+ ${JSON.stringify(to)}`])];
  const diff = lines.join('\n') + '\n';
  return { fieldPath, diff: diff.length > MAX_DIFF ? `${diff.slice(0, MAX_DIFF - 4)}...\n` : diff };
}

function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
}

/** The object as `oc get mcn -o yaml` shows it: MCO's field names, RFC 3339 times, MCO's omissions. */
export function machineConfigNodeObject(m: MachineConfigNode): Record<string, unknown> {
  const status: Record<string, unknown> = {
    conditions: m.status.conditions.map((c) => ({ lastTransitionTime: rfc3339(c.lastTransitionTime), message: c.message, reason: c.reason, status: c.status, type: c.type })),
    configVersion: { current: m.status.currentConfig, desired: m.status.desiredConfig },
    observedGeneration: m.status.observedGeneration,
  };
  if (m.status.pinnedImageSets.length) status.pinnedImageSets = m.status.pinnedImageSets;
  if (m.status.irreconcilableChanges.length) status.irreconcilableChanges = m.status.irreconcilableChanges;
  return {
    apiVersion: MCN_API_VERSION,
    kind: MCN_KIND,
    metadata: { creationTimestamp: rfc3339(m.creationTime), generation: m.status.observedGeneration, name: m.name },
    spec: { configVersion: { desired: m.desiredConfig }, node: { name: m.name }, pool: { name: m.pool } },
    status,
  };
}
