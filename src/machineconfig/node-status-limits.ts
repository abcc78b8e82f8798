// What one node may make the control plane keep and serve. A node's report is stored, copied into
// every ListNodes and GetNode answer and into the pool's conditions; an agent with a bug (or an
// attacker holding a node's certificate) that reports a megabyte reason or ten thousand drift
// entries would otherwise make every status read of the whole cluster that much larger.

import type { Drift, NodeStatus, OsStatus } from './types.ts';
import { boundUpdateRecord } from './update-record.ts';

/** A reason is a sentence or a short stack of them; MCO's are rarely above a few hundred bytes. */
export const MAX_REASON_CHARS = 4096;
/** Drift entries kept; the last entry then says how many more there were. */
export const MAX_DRIFT_ENTRIES = 100;
/** Names, hashes, config names, versions, image references. */
export const MAX_FIELD_CHARS = 1024;
/** Kernel arguments and extensions: a real host has tens. */
export const MAX_LIST_ENTRIES = 256;

/** The status with every field within its limit; a cut is marked where it happened. */
export function boundNodeStatus(status: NodeStatus): NodeStatus {
  return {
    currentConfig: cut(status.currentConfig),
    desiredConfig: cut(status.desiredConfig),
    // An unknown state is kept (the control plane degrades the node, quoting it), but not whole.
    state: cut(status.state) as NodeStatus['state'],
    phase: cut(status.phase),
    reason: cut(status.reason, MAX_REASON_CHARS),
    drift: boundDrift(status.drift),
    os: status.os ? boundOs(status.os) : null,
    bootId: cut(status.bootId),
    agentVersion: cut(status.agentVersion),
    lastDisruption: cut(status.lastDisruption),
    // An agent from before update records sends none: the status stays as it was.
    ...(status.currentUpdate !== undefined ? { currentUpdate: boundUpdateRecord(status.currentUpdate) } : {}),
    ...(status.lastUpdate !== undefined ? { lastUpdate: boundUpdateRecord(status.lastUpdate) } : {}),
  };
}

function boundDrift(drift: readonly Drift[]): Drift[] {
  const kept = drift.slice(0, MAX_DRIFT_ENTRIES).map((d) => ({
    path: cut(d.path), kind: d.kind, expectedHash: cut(d.expectedHash), actualHash: cut(d.actualHash), detectedUnixMs: d.detectedUnixMs,
  }));
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
