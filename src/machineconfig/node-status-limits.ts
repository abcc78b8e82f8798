// What one node may make the control plane keep and serve. A node's report is stored, copied into
// every ListNodes and GetNode answer and into the pool's conditions; an agent with a bug (or an
// attacker holding a node's certificate) that reports a megabyte reason or ten thousand drift
// entries would otherwise make every status read of the whole cluster that much larger.

import { quote } from './control-characters.ts';
import { boundAdoptedContent } from './drift-adoption.ts';
import type { Problem } from './errors.ts';
import { labelProblem } from './pool-membership.ts';
import { MAX_POOL_PINNED_IMAGE_SETS } from './pinned-image-set.ts';
import type { Drift, DriftPolicy, NodeCondition, NodeState, NodeStatus, OsStatus, PinnedImageSetStatus, StagingStatus } from './types.ts';
import { boundUpdateRecord } from './update-record.ts';

/** A reason is a sentence or a short stack of them; MCO's are rarely above a few hundred bytes. */
export const MAX_REASON_CHARS = 4096;
/** Drift entries kept; the last entry then says how many more there were. */
export const MAX_DRIFT_ENTRIES = 100;
/** Names, hashes, config names, versions, image references. */
export const MAX_FIELD_CHARS = 1024;
/** Kernel arguments and extensions: a real host has tens. */
export const MAX_LIST_ENTRIES = 256;

/**
 * Labels an agent may report when it registers. Kubernetes sets no count, but a host with more
 * than a few dozen labels of its own is misconfigured, and every node's labels are stored, sent in
 * every ListNodes answer and matched against every pool's selector on each change.
 */
export const MAX_NODE_LABELS = 64;
/** The longest label key Kubernetes accepts: a 253-character DNS prefix, "/", a 63-character name. */
const MAX_LABEL_KEY_CHARS = 253 + 1 + 63;
const MAX_LABEL_VALUE_CHARS = 63;
/** "4.18.0-rc.1+git.0123abcd.dirty" is 30; a version is one column of `get nodes -o wide`. */
export const MAX_AGENT_VERSION_CHARS = 128;

// C0 controls, DEL, C1 controls.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Why `version` cannot be an agent's version, or undefined when it can. */
export function agentVersionProblem(version: string): string | undefined {
  if (version.length > MAX_AGENT_VERSION_CHARS) return `the agent version ${quote(version, 40)} is longer than ${MAX_AGENT_VERSION_CHARS} characters`;
  const m = CONTROL.exec(version);
  if (m) {
    return `the agent version ${quote(version, 40)} contains the control character U+${m[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}; ` +
      'a version is shown in mcctl\'s tables and may not contain control characters';
  }
  return undefined;
}

/**
 * What is wrong with a registration's labels and agent version, as Kubernetes' API server checks
 * a Node's labels: the syntax and lengths of each key and value, and (mcplane's own bound) their
 * count. The agent is misconfigured: it is refused with the problems named rather than admitted
 * with some of its labels silently gone (they decide its pool).
 */
export function registrationProblems(reg: { nodeName: string; labels: Record<string, string>; agentVersions: string[] }): Problem[] {
  const object = `Node/${reg.nodeName}`;
  const problems: Problem[] = [];
  const keys = Object.keys(reg.labels);
  if (keys.length > MAX_NODE_LABELS) {
    // Each of thousands of labels is not worth a line: the count is the mistake.
    problems.push({ object, field: 'register.labels', rule: 'label-count', message: `${keys.length} labels reported; a node may report at most ${MAX_NODE_LABELS}` });
  } else {
    for (const key of keys) {
      const message = labelSyntaxProblem(key, reg.labels[key]!);
      if (!message) continue;
      // A key fit to print names the field as written; any other is quoted and cut.
      const field = key.length <= MAX_LABEL_KEY_CHARS && !CONTROL.test(key) ? `register.labels.${key}` : `register.labels[${quote(key, 60)}]`;
      problems.push({ object, field, rule: 'label-syntax', message });
    }
  }
  for (const version of new Set(reg.agentVersions)) {
    const message = agentVersionProblem(version);
    if (message) problems.push({ object, field: 'register.agentVersion', rule: 'agent-version', message });
  }
  return problems;
}

/** labelProblem, with what it would quote whole (a key of a megabyte, a control) cut and escaped first. */
function labelSyntaxProblem(key: string, value: unknown): string | undefined {
  if (typeof value !== 'string') return `label ${quote(key, 60)}: the value must be a string`;
  if (key.length > MAX_LABEL_KEY_CHARS) return `label key ${quote(key, 60)}: longer than ${MAX_LABEL_KEY_CHARS} characters (a 253-character DNS prefix, "/" and a 63-character name)`;
  if (value.length > MAX_LABEL_VALUE_CHARS) return `label ${quote(key, 60)}: value ${quote(value, 60)} is longer than ${MAX_LABEL_VALUE_CHARS} characters`;
  if (CONTROL.test(key)) return `label key ${quote(key, 60)}: must be a DNS subdomain prefix and a name of letters, digits, "-", "_" or "."`;
  if (CONTROL.test(value)) return `label ${quote(key, 60)}: value ${quote(value, 60)} must be empty or letters, digits, "-", "_" or "."`;
  return labelProblem(key, value);
}

const NODE_STATES: ReadonlySet<string> = new Set<NodeState>(['Done', 'Working', 'Degraded', 'Unreconcilable', 'RolledBack', 'TryReverted']);

/**
 * What the control plane takes of an agent's report, the one admission step every report (the
 * registration's and each later one) passes through: every field within its limit, and a state
 * outside the protocol's made Degraded, quoting what the agent said.
 */
export function admitNodeStatus(reported: NodeStatus): NodeStatus {
  const status = boundNodeStatus(reported);
  if (NODE_STATES.has(status.state)) return status;
  // Bounded again: the quoted state comes on top of a reason that may already be at its limit.
  return boundNodeStatus({
    ...status,
    state: 'Degraded',
    reason: `agent reported unknown state ${JSON.stringify(status.state)}${status.reason ? `: ${status.reason}` : ''}`,
  });
}

/** The status with every field within its limit; a cut is marked where it happened. */
export function boundNodeStatus(status: NodeStatus): NodeStatus {
  return {
    currentConfig: cut(status.currentConfig),
    desiredConfig: cut(status.desiredConfig),
    // An unknown state is kept (the control plane degrades the node, quoting it), but not whole.
    state: cut(status.state) as NodeStatus['state'],
    phase: cut(status.phase),
    // Agents report command output, whose trailing newline is no part of the reason (it showed
    // as a stray "\n" in every message quoting it).
    reason: cut(typeof status.reason === 'string' ? status.reason.trim() : status.reason, MAX_REASON_CHARS),
    drift: boundDrift(status.drift),
    os: status.os ? boundOs(status.os) : null,
    bootId: cut(status.bootId),
    agentVersion: cut(status.agentVersion),
    lastDisruption: cut(status.lastDisruption),
    // An agent from before update records sends none: the status stays as it was.
    ...(status.currentUpdate !== undefined ? { currentUpdate: boundUpdateRecord(status.currentUpdate) } : {}),
    ...(status.lastUpdate !== undefined ? { lastUpdate: boundUpdateRecord(status.lastUpdate) } : {}),
    ...(status.staging !== undefined ? { staging: boundStaging(status.staging) } : {}),
    ...(status.pinnedImageSets !== undefined ? { pinnedImageSets: boundPinnedImageSets(status.pinnedImageSets) } : {}),
    ...(status.driftPolicy ? { driftPolicy: DRIFT_POLICIES.has(status.driftPolicy) ? status.driftPolicy : '' } : {}),
    ...(status.drifted ? { drifted: boundCondition(status.drifted) } : {}),
    ...(status.agentFeatures !== undefined ? { agentFeatures: (Array.isArray(status.agentFeatures) ? status.agentFeatures : []).slice(0, MAX_AGENT_FEATURES).map((f) => cut(f, 64)) } : {}),
  };
}

/** Features an agent may name: a handful, not a list to store without bound. */
const MAX_AGENT_FEATURES = 16;

const DRIFT_POLICIES: ReadonlySet<string> = new Set<DriftPolicy>(['Degrade', 'Reconcile', 'Adopt']);
const CONDITION_STATUSES: ReadonlySet<string> = new Set(['True', 'False', 'Unknown']);

function boundCondition(c: NodeCondition): NodeCondition | null {
  if (typeof c !== 'object' || c === null) return null;
  return {
    type: cut(c.type, 64),
    status: CONDITION_STATUSES.has(c.status) ? c.status : 'Unknown',
    reason: cut(c.reason, 128),
    message: cut(c.message, MAX_REASON_CHARS),
    lastTransitionTimeUnixMs: typeof c.lastTransitionTimeUnixMs === 'number' && Number.isFinite(c.lastTransitionTimeUnixMs) ? c.lastTransitionTimeUnixMs : 0,
  };
}

/**
 * A pool names at most 100 sets (MCO's MaxItems): an agent reporting more is cut there, each
 * entry's texts bounded, its counts made whole non-negative numbers.
 */
function boundPinnedImageSets(sets: readonly PinnedImageSetStatus[]): PinnedImageSetStatus[] {
  if (!Array.isArray(sets)) return [];
  return sets.slice(0, MAX_POOL_PINNED_IMAGE_SETS).map((s) => ({
    name: cut(s.name),
    desiredGeneration: count(s.desiredGeneration),
    currentGeneration: count(s.currentGeneration),
    imagesDone: count(s.imagesDone),
    imagesTotal: count(s.imagesTotal),
    lastFailedImage: cut(s.lastFailedImage),
    lastFailureReason: cut(typeof s.lastFailureReason === 'string' ? s.lastFailureReason.trim() : s.lastFailureReason, MAX_REASON_CHARS),
    lastFailureUnixMs: count(s.lastFailureUnixMs),
    // mcplane's additions to MCO's fields: kept when the agent sends them.
    ...(s.state !== undefined ? { state: cut(s.state) } : {}),
    ...(s.lastFailureCode !== undefined ? { lastFailureCode: cut(s.lastFailureCode) } : {}),
  }));
}

const STAGING_STATES: ReadonlySet<string> = new Set(['Staging', 'Staged', 'Failed']);

function boundStaging(s: StagingStatus | null): StagingStatus | null {
  if (!s) return null;
  return {
    config: cut(s.config),
    // A state outside the protocol reads as a failure, quoting it.
    state: STAGING_STATES.has(s.state) ? s.state : 'Failed',
    bytesDone: count(s.bytesDone),
    bytesTotal: count(s.bytesTotal),
    reason: cut(STAGING_STATES.has(s.state) ? s.reason : `agent reported unknown staging state ${JSON.stringify(cut(s.state))}${s.reason ? `: ${s.reason}` : ''}`, MAX_REASON_CHARS),
    startedUnixMs: count(s.startedUnixMs),
    endedUnixMs: count(s.endedUnixMs),
  };
}

/** A count or a time: a finite non-negative integer, else 0. */
function count(n: number): number {
  return Number.isSafeInteger(n) && n >= 0 ? n : 0;
}

function boundDrift(drift: readonly Drift[]): Drift[] {
  // Adopt's content (and the file's mode and owner with it) within drift-adoption.ts's bounds.
  const kept: Drift[] = boundAdoptedContent(drift.slice(0, MAX_DRIFT_ENTRIES).map((d) => ({
    path: cut(d.path), kind: d.kind, expectedHash: cut(d.expectedHash), actualHash: cut(d.actualHash), detectedUnixMs: d.detectedUnixMs,
    ...(typeof d.contentBase64 === 'string' && d.contentBase64 ? { contentBase64: d.contentBase64 } : {}),
    ...(typeof d.mode === 'string' && d.mode ? { mode: cut(d.mode, 8) } : {}),
    ...(typeof d.user === 'string' && d.user ? { user: cut(d.user, 16) } : {}),
    ...(typeof d.group === 'string' && d.group ? { group: cut(d.group, 16) } : {}),
    ...(typeof d.contentOmitted === 'string' && d.contentOmitted ? { contentOmitted: cut(d.contentOmitted) } : {}),
  })));
  if (drift.length > MAX_DRIFT_ENTRIES) {
    // An entry rather than a new field: every reader (mcctl describe, pool conditions) already
    // shows drift entries, so the count reaches the operator without anyone changing.
    const rest = drift.length - MAX_DRIFT_ENTRIES;
    kept.push({ path: `… and ${rest} more drifted file${rest === 1 ? '' : 's'} and units (${drift.length} in all; the node reported more than the ${MAX_DRIFT_ENTRIES} kept)`,
      kind: 'file', expectedHash: '', actualHash: '', detectedUnixMs: drift[MAX_DRIFT_ENTRIES]!.detectedUnixMs });
  }
  return kept;
}

function boundOs(os: OsStatus): OsStatus {
  return {
    bootedImage: cut(os.bootedImage),
    bootedChecksum: cut(os.bootedChecksum),
    kernelArguments: boundList(os.kernelArguments),
    kernelType: cut(os.kernelType),
    extensions: boundList(os.extensions),
    stagedImage: cut(os.stagedImage),
    fips: os.fips === true,
  };
}

function boundList(list: readonly string[]): string[] {
  const kept = list.slice(0, MAX_LIST_ENTRIES).map((item) => cut(item));
  if (list.length > MAX_LIST_ENTRIES) kept.push(`… and ${list.length - MAX_LIST_ENTRIES} more`);
  return kept;
}

function cut(text: string, max = MAX_FIELD_CHARS): string {
  if (typeof text !== 'string') return '';
  if (text.length <= max) return text;
  // The marker's own length depends on the count it prints; sized for the longest count it can be.
  let end = max - ` … [cut: ${text.length} more characters]`.length;
  if (/[\ud800-\udbff]/.test(text[end - 1]!)) end--; // never split a surrogate pair
  return `${text.slice(0, end)} … [cut: ${text.length - end} more characters]`;
}
