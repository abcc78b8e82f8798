// A node's update as a timeline: from and to config, each phase with its start and end, the
// disruption taken, the result and the reason. The agent keeps the one running and the last one
// finished in its journal; the control plane keeps the last few per node (NodeHistory). Pure
// shapes and rules, shared by both sides, so both bound and read them the same way.

import { HOOK_POINTS, type HookResult } from './lifecycle-hooks.ts';

/** Superseded: a newer assignment replaced it before it finished (it was neither done nor failed). */
export type UpdateResult = 'Done' | 'Degraded' | 'Unreconcilable' | 'RolledBack' | 'TryReverted' | 'Superseded';

export interface UpdatePhase {
  name: string;
  startedUnixMs: number;
  /** 0 while the phase runs. */
  endedUnixMs: number;
  /** Who ran it: the agent, or the control plane for a step the leader takes (a drain). */
  source: 'agent' | 'control-plane';
}

export interface UpdateRecord {
  id: string;
  fromConfig: string;
  toConfig: string;
  startedUnixMs: number;
  /** 0 while the update runs. */
  endedUnixMs: number;
  phases: UpdatePhase[];
  /** "reboot: <reasons>", the actions taken without one, "none", or "" before it is known. */
  disruption: string;
  /** "" while it runs. */
  result: UpdateResult | '';
  reason: string;
  /** What started it when not an assignment (a drift rewrite under Reconcile); absent otherwise. */
  cause?: string;
  /** The lifecycle hooks' actions it ran (or skipped on their `if`), in order; absent when none. */
  hooks?: HookResult[];
}

/** Hook actions kept per update: 4 points of at most 16 actions each. */
export const MAX_UPDATE_HOOKS = 64;

/** Updates each node's history keeps on the control plane (the oldest goes first). */
export const MAX_HISTORY_UPDATES = 20;
/** Phases kept per update: an update has about eight; a resumed one repeats a few. */
export const MAX_UPDATE_PHASES = 32;
const MAX_TEXT = 1024;
const MAX_REASON = 4096;
const RESULTS: ReadonlySet<string> = new Set(['Done', 'Degraded', 'Unreconcilable', 'RolledBack', 'TryReverted', 'Superseded']);

export function startUpdate(id: string, fromConfig: string, toConfig: string, now: number): UpdateRecord {
  return { id, fromConfig, toConfig, startedUnixMs: now, endedUnixMs: 0, phases: [], disruption: '', result: '', reason: '' };
}

/** Ends the running phase (if another) and starts `name`; the same phase again changes nothing. */
export function enterPhase(record: UpdateRecord, name: string, now: number, source: UpdatePhase['source'] = 'agent'): boolean {
  const open = record.phases.at(-1);
  if (open && open.endedUnixMs === 0 && open.name === name) return false;
  if (open && open.endedUnixMs === 0) open.endedUnixMs = now;
  record.phases.push({ name, startedUnixMs: now, endedUnixMs: 0, source });
  if (record.phases.length > MAX_UPDATE_PHASES) record.phases.splice(0, record.phases.length - MAX_UPDATE_PHASES);
  return true;
}

/** Ends the running phase, if any. */
export function endPhase(record: UpdateRecord, now: number): void {
  const open = record.phases.at(-1);
  if (open && open.endedUnixMs === 0) open.endedUnixMs = now;
}

export function finishUpdate(record: UpdateRecord, result: UpdateResult, reason: string, now: number): UpdateRecord {
  endPhase(record, now);
  return { ...record, endedUnixMs: now, result, reason };
}

/**
 * Adds a phase someone other than the agent ran (the leader's drain) in time order: the seam
 * through which a control-plane step joins the agent's record before it is stored.
 */
export function withPhase(record: UpdateRecord, phase: UpdatePhase): UpdateRecord {
  const phases = [...record.phases.filter((p) => !(p.name === phase.name && p.source === phase.source)), phase]
    .sort((a, b) => a.startedUnixMs - b.startedUnixMs);
  return { ...record, phases, startedUnixMs: Math.min(record.startedUnixMs, phase.startedUnixMs) };
}

/** The newest history with `record` added (or replacing one with its id), within its bound. */
export function appendToHistory(updates: readonly UpdateRecord[], record: UpdateRecord, max = MAX_HISTORY_UPDATES): UpdateRecord[] {
  const kept = updates.filter((u) => u.id !== record.id);
  kept.push(record);
  kept.sort((a, b) => a.startedUnixMs - b.startedUnixMs);
  return kept.slice(-max);
}

/**
 * A record as an agent sent it, with every field within its limit and of its type: a node may
 * be buggy or hostile, and what it sends is stored and shown to operators. null when unusable.
 */
export function boundUpdateRecord(r: unknown): UpdateRecord | null {
  if (typeof r !== 'object' || r === null) return null;
  const x = r as Record<string, unknown>;
  const id = text(x.id, 64);
  if (!id) return null;
  const phases = Array.isArray(x.phases) ? x.phases.slice(-MAX_UPDATE_PHASES).flatMap((p): UpdatePhase[] => {
    if (typeof p !== 'object' || p === null) return [];
    const q = p as Record<string, unknown>;
    const name = text(q.name, 64);
    if (!name) return [];
    return [{ name, startedUnixMs: time(q.startedUnixMs), endedUnixMs: time(q.endedUnixMs), source: q.source === 'control-plane' ? 'control-plane' : 'agent' }];
  }) : [];
  const result = typeof x.result === 'string' && RESULTS.has(x.result) ? x.result as UpdateResult : '';
  return {
    id,
    fromConfig: text(x.fromConfig, MAX_TEXT),
    toConfig: text(x.toConfig, MAX_TEXT),
    startedUnixMs: time(x.startedUnixMs),
    endedUnixMs: time(x.endedUnixMs),
    phases,
    disruption: text(x.disruption, MAX_TEXT),
    result,
    reason: text(x.reason, MAX_REASON),
    ...(typeof x.cause === 'string' && x.cause ? { cause: text(x.cause, MAX_TEXT) } : {}),
    ...boundHooks(x.hooks),
  };
}

function boundHooks(v: unknown): { hooks?: HookResult[] } {
  if (!Array.isArray(v) || v.length === 0) return {};
  const hooks = v.slice(-MAX_UPDATE_HOOKS).flatMap((h): HookResult[] => {
    if (typeof h !== 'object' || h === null) return [];
    const q = h as Record<string, unknown>;
    if (!(HOOK_POINTS as readonly unknown[]).includes(q.point) || !HOOK_RESULTS.has(q.result as string)) return [];
    const argv = Array.isArray(q.argv) ? q.argv.slice(0, 64).map((a) => text(a, 256)) : [];
    const status = typeof q.exitStatus === 'number' && Number.isInteger(q.exitStatus) && q.exitStatus >= -1 && q.exitStatus <= 255 ? q.exitStatus : -1;
    return [{ point: q.point as HookResult['point'], index: Math.min(time(q.index), 1000), argv, exitStatus: status, durationMs: time(q.durationMs), result: q.result as HookResult['result'] }];
  });
  return hooks.length ? { hooks } : {};
}

const HOOK_RESULTS: ReadonlySet<string> = new Set(['success', 'failed', 'timeout', 'skipped']);

function text(v: unknown, max: number): string {
  if (typeof v !== 'string') return '';
  return v.length <= max ? v : `${v.slice(0, max - 20)} … [cut]`;
}

function time(v: unknown): number {
  const n = typeof v === 'string' ? Number(v) : v;
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.floor(n) : 0;
}

/** Longer than this, an update's record is not believed (a clock set wrong, a forged report). */
const MAX_PLAUSIBLE_UPDATE_MS = 7 * 24 * 3600_000;

/** What a typical update took, for planning: the median of finished ones, and how many there were. */
export interface TypicalUpdate {
  ms: number;
  samples: number;
  /** Whether the samples are updates that rebooted (the kind asked for), or any when there were none. */
  rebooting: boolean | 'any';
}

/**
 * The median time of the Done updates among `updates`, of those that rebooted when `reboot` (a
 * reboot takes minutes where a file takes a second), else of those that did not; of all Done
 * ones when none is of that kind; undefined when none finished.
 */
export function typicalUpdate(updates: readonly UpdateRecord[], reboot: boolean): TypicalUpdate | undefined {
  // A record with no start, or one that lasted past a week, is an agent's error, not a timing.
  const done = updates.filter((u) => u.result === 'Done' && u.startedUnixMs > 0 && u.endedUnixMs > u.startedUnixMs && u.endedUnixMs - u.startedUnixMs <= MAX_PLAUSIBLE_UPDATE_MS);
  const sameKind = done.filter((u) => u.disruption.startsWith('reboot') === reboot);
  const chosen = sameKind.length ? sameKind : done;
  if (chosen.length === 0) return undefined;
  const times = chosen.map((u) => u.endedUnixMs - u.startedUnixMs).sort((a, b) => a - b);
  const mid = times.length >> 1;
  const ms = times.length % 2 ? times[mid]! : Math.round((times[mid - 1]! + times[mid]!) / 2);
  return { ms, samples: chosen.length, rebooting: sameKind.length ? reboot : 'any' };
}
