// Events as `kubectl get events` shows them: config rendered, node assigned, phase changed,
// update done or failed, drift, degraded, recovered; and a recordEvent seam for the leader's
// other controllers (drain, maintenance windows, rollback).
//
// Where they are derived: here, in one leader-only controller that compares what the cache
// showed on its last pass with what it shows now, for the kinds it watches (PoolStatus,
// NodeAssignment, NodeStatus). Why here and not where each change is made:
// - one place knows every rule, so a new event is one comparison, not a hunt through writers;
// - the replicas that hold agent streams write NodeStatus in batches and see only their own
//   nodes; the leader sees all of them through the watch, and is the one writer of Event, so
//   replicas never race on a count;
// - the agent's phases reach the store at most once per status batch, so a phase that came and
//   went between two batches would be missed by comparing phase fields; the agent's update
//   timeline (currentUpdate/lastUpdate) lists every phase with its start, so no phase is lost
//   and each event carries the time the agent gave it. Node states (Degraded, drift) are compared
//   as they are: one that comes and goes between two passes (paced at most a second apart) makes
//   no event, but an update's failure is in its timeline's result and always gives UpdateFailed.
// A new leader starts from what the cache shows when it takes over and reports only changes
// after that: a failover costs the events of its few seconds, never a duplicate of old ones.
//
// Bounded: cut back to MAX_EVENTS once there are PRUNE_SLACK more, each dropped EVENT_TTL_MS after
// it last happened (Kubernetes keeps events for an hour by default; a node's update history is
// the long record).

import { createHash } from 'node:crypto';
import type { NodeState, UpdateRecord } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CacheChange, ClusterCache, NodeView } from '../cache/cluster-cache.ts';
import type { Controller, ReconcileResult } from './controller.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import type { WriteOp } from '../store/store.ts';
import type { EventRecord } from '../store/stored-records.ts';

export const MAX_EVENTS = 1000;
export const EVENT_TTL_MS = 60 * 60_000;
/**
 * Events beyond MAX_EVENTS before a pass cuts them back. A cut sorts every event; made on every
 * pass (one per batch of status reports in a fan-out) it was 4 % of the leader's CPU per report.
 */
export const PRUNE_SLACK = 100;
const SWEEP_MS = 60_000;
const MAX_MESSAGE = 1024;

export interface EventInput {
  type: 'Normal' | 'Warning';
  /** CamelCase, as Kubernetes' reasons: NodeAssigned, DrainStarted, WindowClosed, RolledBack. */
  reason: string;
  /** node/<name> or pool/<name>. */
  object: string;
  message: string;
  /** The object's pool; for node/<name> the node's current pool when omitted. */
  pool?: string;
  /** When it happened (default now). */
  at?: number;
}

/** Events about the same object with the same reason and message are one event, counted. */
export function eventName(e: Pick<EventInput, 'object' | 'reason' | 'message'>): string {
  return `${e.object.replace('/', '.')}.${createHash('sha256').update(`${e.reason}\0${e.message}`).digest('hex').slice(0, 12)}`;
}

interface NodeSeen {
  desired: string;
  state: NodeState;
  drift: number;
  /** Phases already reported, per update id (the running update and the last finished). */
  phases: Map<string, number>;
  lastUpdate: string;
  /** Degraded or Unreconcilable since it last was Done (it goes through Working to recover). */
  failed: NodeState | '';
  /** The phase a failed node failed in ("" otherwise): a new failure in another phase is news. */
  failedIn?: string;
}

const WATCHED = ['PoolStatus', 'NodeAssignment', 'NodeStatus', 'Node'] as const;
const FAILED: ReadonlySet<string> = new Set(['Degraded', 'Unreconcilable']);

export class EventRecorder implements Controller {
  readonly name = 'events';
  readonly leaderOnly = true;
  /** A pass compares every node with what the last pass saw. */
  readonly pacedByCost = true;
  /** The events of a burst of reports come from one pass per 100 ms, not one per batch stored. */
  readonly minIntervalMs = 100;
  /** What the last pass saw; undefined until this replica's leadership took its first look. */
  #nodes: Map<string, NodeSeen> | undefined;
  #pools = new Map<string, { target: string; problems: string }>();
  /** The leadership the snapshot belongs to: a new term starts from a new snapshot. */
  #term = '';
  #writing: Promise<void> = Promise.resolve();
  /**
   * Nodes whose view changed since the last pass, or every node. A pass looks only at these:
   * going through all of them on every pass cost a new leader a second of every fifteen while
   * a dead replica's agents registered again.
   */
  #dirty: Set<string> | 'all' = 'all';
  /** When (ms) the next cut is due even below the bound: the oldest event's expiry, or the sweep. */
  #nextCutAt = 0;

  private readonly cache: ClusterCache;
  private readonly writer: LeaderWriter;
  private readonly log: Logger;
  constructor(cache: ClusterCache, writer: LeaderWriter, log: Logger) {
    this.cache = cache;
    this.writer = writer;
    this.log = log;
  }

  interestedIn(change: CacheChange): boolean {
    if (change.resync) this.#dirty = 'all';
    else if (this.#dirty !== 'all') for (const node of change.nodes) this.#dirty.add(node);
    return WATCHED.some((k) => change.changed.has(k));
  }

  /**
   * The seam for other leader-only controllers (drain, windows, rollback): stores one event,
   * counted with its earlier repeats. Call it only while leading (the write is fenced).
   */
  recordEvent(e: EventInput): Promise<void> {
    return this.#write([e]);
  }

  async reconcile(signal?: AbortSignal, now = Date.now()): Promise<ReconcileResult> {
    const leader = this.cache.leader;
    // The leader record is written once per election: its revision names the term.
    const term = leader ? `${leader.value.replica}@${leader.resourceVersion}` : '';
    const first = this.#nodes === undefined || term !== this.#term;
    this.#term = term;
    const dirty = first ? 'all' : this.#dirty;
    this.#dirty = new Set();
    const out: EventInput[] = [];
    // What this pass saw of the nodes it looked at; undefined for a node gone.
    const seen = new Map<string, NodeSeen | undefined>();
    const look = (view: NodeView): void => {
      // A node new since the last pass starts from nothing, except the update it finished
      // before it came (its journal's lastUpdate is old news).
      const before = first ? undefined : this.#nodes!.get(view.name) ?? {
        desired: '', state: 'Done' as NodeState, drift: 0, failed: '' as const, failedIn: '', lastUpdate: view.status.lastUpdate?.id ?? '',
        phases: new Map(view.status.lastUpdate ? [[view.status.lastUpdate.id, view.status.lastUpdate.phases.length]] : []),
      };
      seen.set(view.name, this.#node(view, before, out, now));
    };
    if (dirty === 'all') {
      for (const view of this.cache.nodes.values()) look(view);
      for (const name of this.#nodes?.keys() ?? []) if (!seen.has(name)) seen.set(name, undefined);
    } else {
      for (const name of dirty) {
        const view = this.cache.nodes.get(name);
        if (view) look(view);
        else seen.set(name, undefined);
      }
    }
    const pools = new Map<string, { target: string; problems: string }>();
    for (const [name, stored] of this.cache.poolStatuses) {
      const seen = { target: stored.value.target, problems: stored.value.renderProblems.map((p) => `${p.object}: ${p.field}: ${p.message}`).join('; ') };
      pools.set(name, seen);
      const before = this.#pools.get(name);
      if (first) continue;
      if (seen.target && seen.target !== before?.target) {
        out.push({ type: 'Normal', reason: 'ConfigRendered', object: `pool/${name}`, pool: name, message: `rendered ${seen.target} from ${stored.value.targetSources.length} MachineConfig${stored.value.targetSources.length === 1 ? '' : 's'}: ${stored.value.targetSources.join(', ')}`, at: now });
      }
      if (seen.problems && seen.problems !== before?.problems) {
        out.push({ type: 'Warning', reason: 'RenderFailed', object: `pool/${name}`, pool: name, message: seen.problems, at: now });
      }
    }
    try {
      await this.#write(out);
    } catch (err) {
      // Derived again on the retry: what this pass looked at stays to be looked at.
      const since = this.#dirty as Set<string> | 'all';
      if (dirty === 'all' || since === 'all') this.#dirty = 'all';
      else for (const name of dirty) since.add(name);
      throw err;
    }
    // Only once stored, for the same reason.
    if (first) this.#nodes = new Map();
    for (const [name, node] of seen) {
      if (node) this.#nodes!.set(name, node);
      else this.#nodes!.delete(name);
    }
    this.#pools = pools;
    await this.#prune(now);
    return { requeueAfterMs: SWEEP_MS };
  }

  /** What a node looks like now; the events its change since `before` makes go into `out`. */
  #node(view: NodeView, before: NodeSeen | undefined, out: EventInput[], now: number): NodeSeen {
    const s = view.status;
    const updates = [s.lastUpdate, s.currentUpdate].filter((u): u is UpdateRecord => !!u);
    const seen: NodeSeen = {
      desired: view.desiredConfig, state: s.state, drift: s.drift.length, lastUpdate: s.lastUpdate?.id ?? '',
      failed: FAILED.has(s.state) ? s.state : s.state === 'Done' ? '' : before?.failed ?? '',
      failedIn: FAILED.has(s.state) ? s.phase : '',
      phases: new Map(updates.map((u) => [u.id, u.phases.length])),
    };
    if (!before) return seen;
    const object = `node/${view.name}`;
    const pool = view.pool;
    const add = (type: EventInput['type'], reason: string, message: string, at = now): void => { out.push({ type, reason, object, pool, message, at }); };
    if (seen.desired && seen.desired !== before.desired) {
      // This pass may come after the agent already started on it (the dispatcher sends as soon
      // as the assignment is stored): the assignment happened no later than that start.
      const started = updates.filter((u) => u.toConfig === seen.desired && u.startedUnixMs > 0).map((u) => u.startedUnixMs - 1);
      add('Normal', 'NodeAssigned', `assigned ${seen.desired}${before.desired ? ` (was ${before.desired})` : ''}`, Math.min(now, ...started));
    }
    for (const u of updates) {
      for (const phase of u.phases.slice(before.phases.get(u.id) ?? 0)) {
        add('Normal', 'PhaseChanged', `update ${u.fromConfig || '<none>'} -> ${u.toConfig}: ${phase.name}${phase.source === 'control-plane' ? ' (control plane)' : ''}`, phase.startedUnixMs || now);
      }
    }
    const last = s.lastUpdate;
    if (last && last.id !== before.lastUpdate && last.result) {
      // Each lifecycle hook the update ran, before what the update came to (a hook may be why).
      for (const h of last.hooks ?? []) {
        if (h.result === 'skipped') continue;
        const what = `update ${last.fromConfig || '<none>'} -> ${last.toConfig}: hook ${h.point}[${h.index}] ${h.argv.join(' ')}`;
        if (h.result === 'success') add('Normal', 'HookSucceeded', `${what} exited 0 in ${(h.durationMs / 1000).toFixed(1)}s`, last.endedUnixMs || now);
        else add('Warning', 'HookFailed', `${what} ${h.result === 'timeout' ? 'was killed at its timeout' : `exited ${h.exitStatus}`} after ${(h.durationMs / 1000).toFixed(1)}s`, last.endedUnixMs || now);
      }
      const took = last.endedUnixMs && last.startedUnixMs ? ` in ${Math.max(0, Math.round((last.endedUnixMs - last.startedUnixMs) / 1000))}s` : '';
      const at = last.endedUnixMs || now;
      // A rewrite under driftPolicy Reconcile is an update of the node to its own config: said so.
      if (last.cause) add('Warning', 'DriftReconciled', `${last.cause}; ${last.result === 'Done' ? `re-applied ${last.toConfig}${took}` : `the rewrite ended ${last.result}: ${last.reason}`}`, at);
      else if (last.result === 'Done') add('Normal', 'UpdateDone', `updated ${last.fromConfig || '<none>'} -> ${last.toConfig}${took} (disruption: ${last.disruption || 'none'})`, at);
      else if (last.result === 'Superseded') add('Normal', 'UpdateSuperseded', `update ${last.fromConfig || '<none>'} -> ${last.toConfig} ${last.reason}`, at);
      else if (last.result === 'TryReverted') add('Warning', 'TryReverted', `update ${last.fromConfig || '<none>'} -> ${last.toConfig} tried and reverted: ${last.reason}`, at);
      else if (last.result === 'RolledBack') add('Warning', 'RolledBack', `update ${last.fromConfig || '<none>'} -> ${last.toConfig} rolled back: ${last.reason}`, at);
      else add('Warning', 'UpdateFailed', `update ${last.fromConfig || '<none>'} -> ${last.toConfig} ${last.result}: ${last.reason}`, at);
    }
    if (seen.drift > 0 && before.drift === 0) {
      add('Warning', 'DriftDetected', `drift: ${s.drift.map((d) => `${d.kind} ${d.path}`).join(', ')}`);
    }
    // Failed again in another step (a rewrite's validation, then drift) is a new failure too.
    if (FAILED.has(seen.state) && (seen.state !== before.state || (before.failedIn !== undefined && seen.failedIn !== before.failedIn))) add('Warning', seen.state, s.reason || `the node is ${seen.state}`);
    if (seen.state === 'Done' && before.failed) add('Normal', 'Recovered', `the node is Done again on ${s.currentConfig || '<none>'} (was ${before.failed})`);
    return seen;
  }

  /** Stores events in order, each added to its earlier repeats; one writer at a time. */
  #write(inputs: EventInput[]): Promise<void> {
    if (inputs.length === 0) return this.#writing;
    const run = this.#writing.then(async () => {
      const merged = new Map<string, EventRecord>();
      for (const e of inputs) {
        const message = e.message.length > MAX_MESSAGE ? `${e.message.slice(0, MAX_MESSAGE - 20)} … [cut]` : e.message;
        const name = eventName({ ...e, message });
        const at = e.at ?? Date.now();
        const previous = merged.get(name) ?? this.cache.events.get(name)?.value;
        const pool = e.pool ?? (e.object.startsWith('node/') ? this.cache.nodes.get(e.object.slice(5))?.pool ?? '' : e.object.startsWith('pool/') ? e.object.slice(5) : '');
        merged.set(name, previous
          ? { ...previous, pool: pool || previous.pool, count: previous.count + 1, lastTimestamp: Math.max(previous.lastTimestamp, at), firstTimestamp: Math.min(previous.firstTimestamp, at) }
          : { type: e.type, reason: e.reason, object: e.object, message, pool, firstTimestamp: at, lastTimestamp: at, count: 1 });
      }
      const ops: WriteOp[] = [...merged].map(([name, value]) => {
        const existing = this.cache.events.get(name);
        return { type: 'put', kind: 'Event', name, value, expectedVersion: existing?.resourceVersion ?? null, ...(existing ? { createdAt: existing.createdAt } : {}) };
      });
      await this.writer.commitEach(ops);
    });
    this.#writing = run.catch(() => undefined);
    return run;
  }

  /**
   * Drops events past their time, then the oldest beyond the bound: when there are PRUNE_SLACK
   * more than the bound, or when the oldest may have expired (or a sweep is due: an event stored
   * with an old time of its own), not on every pass.
   */
  async #prune(now: number): Promise<void> {
    if (this.cache.events.size <= MAX_EVENTS + PRUNE_SLACK && now < this.#nextCutAt) return;
    const all = [...this.cache.events.values()].sort((a, b) => a.value.lastTimestamp - b.value.lastTimestamp);
    const expired = all.filter((e) => e.value.lastTimestamp < now - EVENT_TTL_MS);
    const kept = all.length - expired.length;
    const excess = kept > MAX_EVENTS ? all.slice(expired.length, expired.length + kept - MAX_EVENTS) : [];
    const drop = [...expired, ...excess];
    const oldestKept = all[drop.length];
    this.#nextCutAt = Math.min(now + SWEEP_MS, oldestKept ? oldestKept.value.lastTimestamp + EVENT_TTL_MS : Infinity);
    if (drop.length === 0) return;
    await (this.#writing = this.#writing.then(() => this.writer.commitEach(drop.map((e) => ({ type: 'delete', kind: 'Event', name: e.name, expectedVersion: e.resourceVersion })))).catch((err: unknown) => {
      this.#nextCutAt = 0;
      this.log.warn({ err }, 'could not delete old events; the next sweep tries again');
    }));
  }
}
