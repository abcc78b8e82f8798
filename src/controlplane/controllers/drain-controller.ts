// Drains a node before its agent may take a disruptive update, as MCO's drain controller does
// since 4.11 (the agent needs no cluster credentials). The rollout writes a config that needs a
// drain with holdForDrain set; this controller, on the leader only, then
//   cordons the Kubernetes Node (spec.unschedulable),
//   evicts every pod on it but DaemonSet and mirror pods through the Eviction API, which applies
//     each pod's PodDisruptionBudget (429 means "not now": retried with backoff, and the node's
//     reason names the pod, the budget and what it allows) and each pod's own grace period,
//   waits until those pods are gone, then clears the hold in the same commit that marks the
//     drain Drained (the replica holding the agent's stream sends the config on that write),
//   and once the agent reports Done on the config, uncordons the node and forgets the drain.
// Where a drain stands is a stored NodeDrain record, so a new leader after a failover resumes it
// from there: the hold stays until some leader has seen the node empty.

import { formatDuration, formatWait, McplaneError, windowState } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import type { Clock } from '../replica/clock.ts';
import type { ReconcileResult } from './controller.ts';
import type { KeyedController } from './reconciler.ts';
import { failureMessage, type NodeOperations } from '../kubernetes/node-operations.ts';
import type { EventRecorder } from '../kubernetes/event-recorder.ts';
import type { KubernetesNodeSync } from '../kubernetes/kubernetes-node-sync.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import type { WriteOp } from '../store/store.ts';
import { withoutDrainHold } from './drain-gate.ts';
import type { DrainBlock, NodeAssignmentRecord, NodeDrainRecord } from '../store/stored-records.ts';

export interface DrainSettings {
  /** The first retry after a refused eviction; doubles with each refused round. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** How often a drain looks again while evicted pods terminate. */
  pollMs: number;
  /** Nodes drained at once. */
  concurrency: number;
}

/** What a drain did, for whoever wants to know beyond the Node's Kubernetes Events. */
export interface DrainEvent {
  node: string;
  type: 'Normal' | 'Warning';
  /** Cordon, DrainBlocked, Drained, Uncordon, Recordoned. */
  reason: string;
  message: string;
  /** With Drained: how long the drain took (clock time). */
  seconds?: number;
}

export const DEFAULT_DRAIN_SETTINGS: DrainSettings = { retryBaseMs: 5000, retryMaxMs: 120_000, pollMs: 1000, concurrency: 10 };

/** How many pods a reason names before it says "and N more". */
const NAMED_PODS = 3;
/** How many of the pods left the record keeps (a node may run hundreds). */
const REMAINING_KEPT = 20;

export class DrainController implements KeyedController<string> {
  readonly name = 'drain';
  readonly leaderOnly = true;
  /**
   * Nodes drained at once: each drain holds a worker while it waits on the API server, so a
   * drain that a budget holds, or a slow API server, never holds up another node's drain.
   */
  readonly concurrency: number;
  /**
   * The seam for mcplane's own events, metrics and update history: called with each step the
   * Node's Kubernetes Events record (Drained carries the drain's duration).
   */
  onEvent: (event: DrainEvent) => void = () => {};
  /** Real time of a node's next eviction round after a refusal. */
  #retryAt = new Map<string, number>();
  /**
   * Refused rounds in a row under this leader: the backoff grows with it. A new leader starts
   * again from the shortest delay, as a restarted kubelet does with its back-off.
   */
  #refusals = new Map<string, number>();

  private readonly cache: ClusterCache;
  private readonly writer: LeaderWriter;
  private readonly clock: Clock;
  private readonly log: Logger;
  /** Absent without Kubernetes access: holds and drains wait for a leader that has it. */
  private readonly kube: { ops: NodeOperations; sync: KubernetesNodeSync; events?: EventRecorder } | undefined;
  private readonly settings: DrainSettings;
  constructor(
    cache: ClusterCache,
    writer: LeaderWriter,
    clock: Clock,
    log: Logger,
    kube: { ops: NodeOperations; sync: KubernetesNodeSync; events?: EventRecorder } | undefined,
    settings: DrainSettings = DEFAULT_DRAIN_SETTINGS,
  ) {
    this.cache = cache;
    this.writer = writer;
    this.clock = clock;
    this.log = log;
    this.kube = kube;
    this.settings = settings;
    this.concurrency = settings.concurrency;
  }

  /**
   * The nodes a change concerns: each one's drain is looked at now (its assignment, its agent or
   * its Node moved). Not the drain's own record: this controller writes it, and each step says
   * when the next is due; a write of its own must not bring the next step (and its pod list)
   * forward. A drain record that went away (ended on another leader, its node deleted) takes the
   * node's backoff with it.
   */
  *keysFor(change: CacheChange): Iterable<string> {
    for (const name of change.changed.get('NodeDrain') ?? []) if (!this.cache.drains.has(name)) this.#forget(name);
    if (change.resync) {
      for (const map of [this.#retryAt, this.#refusals]) {
        for (const name of map.keys()) if (!this.cache.drains.has(name)) map.delete(name);
      }
    }
    if (change.resync || change.changed.has('MachineConfigPool')) {
      yield* this.#allKeys();
      return;
    }
    const seen = new Set<string>();
    for (const kind of ['NodeAssignment', 'KubernetesNode', 'NodeStatus'] as const) {
      for (const name of change.changed.get(kind) ?? []) {
        if (seen.has(name)) continue;
        seen.add(name);
        if (this.#concerns(name)) yield name;
      }
    }
  }

  async reconcile(name: string, signal: AbortSignal): Promise<ReconcileResult> {
    if (!this.kube) {
      await this.#withoutKubernetes(name, signal);
      return {};
    }
    await this.#startDrain(name, signal);
    if (!this.cache.drains.has(name)) {
      // Over, or ended elsewhere (another leader, a deleted node): nothing is left behind here.
      this.#forget(name);
      return {};
    }
    const next = await this.#step(name, this.kube.ops, signal).catch(async (err: unknown) => {
      // The store's own errors (a newer write, the store unreachable) are retried by the
      // reconciler; what is left is the Kubernetes API's, which the node's reason names.
      if (signal.aborted || err instanceof McplaneError) throw err;
      this.log.warn({ err: failureMessage(err), node: name }, 'drain step failed; retrying');
      await this.#noteFailure(name, err, signal).catch(() => undefined);
      return this.settings.retryBaseMs;
    });
    if (next === undefined) {
      this.#forget(name);
      return {};
    }
    return { requeueAfterMs: Math.max(10, next) };
  }

  #concerns(name: string): boolean {
    return this.cache.drains.has(name) || this.cache.assignments.get(name)?.value.holdForDrain === true || (!this.kube && this.cache.kubernetesNodes.has(name));
  }

  *#allKeys(): Iterable<string> {
    const names = new Set([...this.cache.drains.keys(), ...this.cache.kubernetesNodes.keys()]);
    for (const [name, a] of this.cache.assignments) if (a.value.holdForDrain) names.add(name);
    for (const name of names) if (this.#concerns(name)) yield name;
  }

  #forget(name: string): void {
    this.#retryAt.delete(name);
    this.#refusals.delete(name);
  }

  /** A drain record for the node's held assignment if it has none (or its last drain is over). */
  async #startDrain(name: string, signal: AbortSignal): Promise<void> {
    const assignment = this.cache.assignments.get(name);
    if (!assignment?.value.holdForDrain) return;
    const ops: WriteOp[] = [];
    const existing = this.cache.drains.get(name);
    const status = this.cache.nodeStatuses.get(name)?.value.status;
    if (status?.state === 'Done' && status.currentConfig === assignment.value.desiredConfig) {
      // Held by a re-decision (a policy change) after the node had started: it finished with
      // the plan it had, which needed no drain. Nothing is left to drain for; a drain under
      // way ends here (its record goes to Drained, and the next step uncordons the node).
      ops.push(this.#putAssignment(name, withoutDrainHold(assignment.value), assignment.resourceVersion, assignment.createdAt));
      if (existing?.value.phase === 'Draining') {
        const { blocked: _b, failures: _f, nextRetryAt: _n, timedOut: _t, degraded: _d, ...rest } = existing.value;
        ops.push(this.#put(name, { ...rest, phase: 'Drained', remaining: [], reason: `the node finished its update to ${assignment.value.desiredConfig} before its drain did: no drain needed` }, existing.resourceVersion));
        this.log.info({ node: name, config: assignment.value.desiredConfig }, 'node finished its update during its drain; drain ended');
      }
    } else if (existing?.value.phase === 'Draining') {
      // The pool moved on mid-drain: the same drain serves the newer config.
      if (existing.value.config !== assignment.value.desiredConfig) ops.push(this.#put(name, { ...existing.value, config: assignment.value.desiredConfig }, existing.resourceVersion));
    } else {
      const kube = this.cache.kubernetesNodes.get(name)?.value;
      const value: NodeDrainRecord = {
        config: assignment.value.desiredConfig,
        phase: 'Draining',
        startedAt: this.clock.now(),
        // Still cordoned from a drain that is over (an update that did not finish): keep its facts.
        // A Node someone else cordoned counts as cordoned, and stays so after the update.
        cordoned: existing?.value.cordoned ?? kube?.unschedulable === true,
        wasCordoned: existing ? existing.value.wasCordoned : kube?.unschedulable === true,
        recordoned: 0,
        attempt: 0,
        refusals: 0,
        remaining: [],
        reason: 'draining: cordoning the node',
      };
      this.log.info({ node: name, config: value.config }, 'drain started');
      ops.push(this.#put(name, value, existing?.resourceVersion ?? null));
    }
    await this.writer.commitEach(ops, signal);
  }

  /** One look at one drain; the real-time delay until the next, or undefined when it is over. */
  async #step(name: string, ops: NodeOperations, signal: AbortSignal): Promise<number | undefined> {
    const stored = this.cache.drains.get(name)!;
    const drain = stored.value;
    const assignment = this.cache.assignments.get(name);
    const kube = this.cache.kubernetesNodes.get(name)?.value;
    if (!assignment || !kube) {
      // The host was deleted, or its Node left the cluster (its pods go with it): nothing to hold.
      const writes: WriteOp[] = [{ type: 'delete', kind: 'NodeDrain', name, expectedVersion: stored.resourceVersion }];
      if (assignment?.value.holdForDrain) {
        writes.push(this.#putAssignment(name, { ...withoutDrainHold(assignment.value), drainNote: 'not drained: its Kubernetes Node was deleted during the drain' }, assignment.resourceVersion, assignment.createdAt));
      }
      // A host deleted from mcplane mid-drain leaves its Node as it found it.
      if (!assignment && kube && drain.cordoned && !drain.wasCordoned) await this.kube!.sync.observe(await ops.setUnschedulable(name, false, signal));
      this.log.warn({ node: name, reason: assignment ? 'Kubernetes Node deleted' : 'node deleted' }, 'drain abandoned');
      await this.writer.commit(writes, signal);
      return undefined;
    }

    let next: NodeDrainRecord = { ...drain };
    // Cordoned for the whole update, drain and disruption alike: someone uncordoning it in
    // between would let pods land on a node about to reboot.
    if (!kube.unschedulable) {
      if (drain.cordoned) {
        next.recordoned++;
        // Whoever uncordoned it wants it schedulable: it is uncordoned after the update.
        next.wasCordoned = false;
        this.log.warn({ node: name, times: next.recordoned }, 'node was uncordoned during its update; cordoning it again');
        this.#event(name, 'Warning', 'Recordoned', `uncordoned during its update to ${drain.config}; cordoned again`);
      } else {
        this.#event(name, 'Normal', 'Cordon', `cordoned to drain it for ${drain.config}`);
      }
      await this.kube!.sync.observe(await ops.setUnschedulable(name, true, signal));
      next.cordoned = true;
    }

    if (drain.phase === 'Drained') return this.#afterDrain(name, next, stored.resourceVersion, ops, signal);
    if (!assignment.value.holdForDrain) {
      // The rollout gave the node a config that needs no drain: nothing more to evict.
      next = { ...next, phase: 'Drained', reason: 'drain not needed for the new config; cordoned until the update is done' };
      delete next.blocked;
      await this.writer.commit([this.#put(name, next, stored.resourceVersion)], signal);
      return this.settings.pollMs;
    }

    const pods = await ops.podsToEvict(name, signal);
    if (pods.length === 0) {
      // A drain can outlast the maintenance window the rollout started it in (a budget held it):
      // the reboot then waits, drained and cordoned, for the next window rather than go now.
      const closed = this.#windowClosed(assignment.value.pool);
      if (closed) {
        const reason = `drained; the maintenance window closed during the drain: ${assignment.value.desiredConfig} is released when the next opens (${new Date(closed.nextStart).toISOString()}, in ${formatWait(closed.nextStart - this.clock.now())})`;
        if (drain.reason !== reason) this.log.info({ node: name, nextWindow: new Date(closed.nextStart).toISOString() }, 'node drained after its maintenance window closed; its config waits for the next');
        const waiting: NodeDrainRecord = { ...next, remaining: [], reason };
        if (JSON.stringify(waiting) !== JSON.stringify(drain)) await this.writer.commit([this.#put(name, waiting, stored.resourceVersion)], signal);
        return Math.max(this.settings.pollMs, Math.min(closed.nextStart - this.clock.now(), 60_000));
      }
      next = { ...next, phase: 'Drained', remaining: [], reason: `drained; cordoned until the update to ${assignment.value.desiredConfig} is done` };
      delete next.blocked;
      delete next.failures;
      delete next.nextRetryAt;
      delete next.timedOut;
      delete next.degraded;
      this.log.info({ node: name, config: assignment.value.desiredConfig, attempts: next.attempt, seconds: Math.round((this.clock.now() - drain.startedAt) / 1000) }, 'node drained; releasing its config');
      next.drainedAt = this.clock.now();
      await this.writer.commit([
        this.#put(name, next, stored.resourceVersion),
        this.#putAssignment(name, withoutDrainHold(assignment.value), assignment.resourceVersion, assignment.createdAt),
      ], signal);
      this.#event(name, 'Normal', 'Drained', `drained; ${assignment.value.desiredConfig} released to the node's agent`, (next.drainedAt - drain.startedAt) / 1000);
      return this.settings.pollMs;
    }

    let delay = this.settings.pollMs;
    const toEvict = pods.filter((p) => !p.terminating);
    const now = this.clock.now();
    if (toEvict.length > 0 && (this.#retryAt.get(name) ?? 0) <= Date.now()) {
      next.attempt++;
      let blocked: DrainBlock | undefined;
      const failures: string[] = [];
      let evicted = 0;
      for (const pod of toEvict) {
        const result = await ops.evict(pod, signal);
        if (result.outcome === 'evicted' || result.outcome === 'gone') evicted++;
        else if (result.outcome === 'refused') blocked ??= { namespace: pod.namespace, pod: pod.name, budget: result.budget, disruptionsAllowed: result.disruptionsAllowed, message: result.message };
        else failures.push(`${pod.namespace}/${pod.name}: ${result.message}`);
      }
      if (blocked || failures.length) {
        next.refusals++;
        const inARow = (this.#refusals.get(name) ?? 0) + 1;
        this.#refusals.set(name, inARow);
        const backoff = Math.min(this.settings.retryMaxMs, this.settings.retryBaseMs * 2 ** Math.min(inARow - 1, 20));
        this.#retryAt.set(name, Date.now() + backoff);
        next.nextRetryAt = now + backoff;
        delay = evicted > 0 ? Math.min(backoff, this.settings.pollMs) : backoff;
        if (blocked) this.log.info({ node: name, pod: `${blocked.namespace}/${blocked.pod}`, budget: blocked.budget || undefined, disruptionsAllowed: blocked.disruptionsAllowed, attempt: next.attempt, retryInMs: backoff }, 'eviction refused by a disruption budget; retrying');
        if (failures.length) this.log.warn({ node: name, failures, attempt: next.attempt, retryInMs: backoff }, 'evictions failed; retrying');
        if (blocked) next.blocked = blocked;
        else delete next.blocked;
        // Worded without attempt or time, so a repeat bumps the Event's count.
        if (blocked) this.#event(name, 'Warning', 'DrainBlocked', `eviction of pod ${blocked.namespace}/${blocked.pod} refused${blocked.budget ? ` by PodDisruptionBudget ${blocked.namespace}/${blocked.budget}` : ''}: ${blocked.message}`);
        next.failures = failures;
      } else {
        next.refusals = 0;
        this.#refusals.delete(name);
        delete next.blocked;
        delete next.nextRetryAt;
        delete next.failures;
        this.#retryAt.delete(name);
      }
    } else if (toEvict.length > 0) {
      delay = Math.max(10, (this.#retryAt.get(name) ?? 0) - Date.now());
    }
    next.remaining = pods.slice(0, REMAINING_KEPT).map((p) => `${p.namespace}/${p.name}`);

    const policy = this.cache.pools.get(assignment.value.pool)?.value.spec.drain;
    if (policy?.timeoutSeconds !== undefined && now - drain.startedAt >= policy.timeoutSeconds * 1000) {
      if (!next.timedOut) this.log.warn({ node: name, timeoutSeconds: policy.timeoutSeconds, onTimeout: policy.onTimeout ?? 'Wait' }, 'drain timed out');
      next.timedOut = true;
      if (policy.onTimeout === 'Degrade') next.degraded = true;
      else delete next.degraded;
    } else {
      delete next.timedOut;
      delete next.degraded;
    }
    next.reason = drainingReason(next, pods.length, now, policy?.timeoutSeconds, assignment.value.pool);
    if (JSON.stringify(next) !== JSON.stringify(drain)) await this.writer.commit([this.#put(name, next, stored.resourceVersion)], signal);
    return delay;
  }

  /** Drained and released: uncordon once the agent is Done on the config, then forget the drain. */
  async #afterDrain(name: string, next: NodeDrainRecord, version: string, ops: NodeOperations, signal: AbortSignal): Promise<number | undefined> {
    const desired = this.cache.assignments.get(name)?.value.desiredConfig ?? '';
    const status = this.cache.nodeStatuses.get(name)?.value.status;
    if (status?.currentConfig === desired && status.state === 'Done') {
      if (next.cordoned && !next.wasCordoned) {
        await this.kube!.sync.observe(await ops.setUnschedulable(name, false, signal));
        this.#event(name, 'Normal', 'Uncordon', `uncordoned: the node is Done on ${desired}`);
      }
      this.log.info({ node: name, config: desired, uncordoned: next.cordoned && !next.wasCordoned }, next.wasCordoned ? 'node updated; left cordoned as it was before the drain' : 'node updated and uncordoned');
      await this.writer.commit([{ type: 'delete', kind: 'NodeDrain', name, expectedVersion: version }], signal);
      return undefined;
    }
    if (next.recordoned !== this.cache.drains.get(name)?.value.recordoned) {
      next.reason = `${next.reason.replace(/; uncordoned by someone.*$/, '')}; uncordoned by someone during the update, cordoned again (${next.recordoned}×)`;
      await this.writer.commit([this.#put(name, next, version)], signal);
    }
    // The agent's progress arrives as a change; this is only a safety net.
    return this.settings.pollMs * 10;
  }

  /** A Kubernetes Event on the Node (`kubectl describe node`), never waited for nor fatal. */
  #event(node: string, type: 'Normal' | 'Warning', reason: string, message: string, seconds?: number): void {
    try {
      this.onEvent({ node, type, reason, message, ...(seconds !== undefined ? { seconds } : {}) });
    } catch (err) {
      this.log.warn({ err, node, reason }, 'a drain event listener failed');
    }
    const events = this.kube?.events;
    if (!events) return;
    const uid = this.cache.kubernetesNodes.get(node)?.value.uid;
    void events.record({ apiVersion: 'v1', kind: 'Node', name: node, ...(uid ? { uid } : {}) }, type, reason, message);
  }

  /** The node's reason says why its drain is not moving when the cluster's API fails. */
  async #noteFailure(name: string, err: unknown, signal: AbortSignal): Promise<void> {
    const stored = this.cache.drains.get(name);
    if (stored?.value.phase !== 'Draining') return;
    const reason = `draining: the Kubernetes API failed (${failureMessage(err)}); retrying`;
    if (stored.value.reason === reason) return;
    await this.writer.commit([this.#put(name, { ...stored.value, reason }, stored.resourceVersion)], signal);
  }

  /**
   * Without Kubernetes access on this leader nothing can drain, and a config held for a drain must
   * not reach its node undrained (a replica started without --kubeconfig may lead for a while):
   * held configs and drains in progress wait for a leader that has access, and say so.
   */
  async #withoutKubernetes(name: string, signal: AbortSignal): Promise<void> {
    const ops: WriteOp[] = [];
    const a = this.cache.assignments.get(name);
    if (a?.value.holdForDrain && a.value.drainNote !== NO_ACCESS) {
      this.log.warn({ node: name }, 'config held for a drain, but this leader has no Kubernetes access (--kubeconfig); it stays held until a leader with access drains the node');
      ops.push(this.#putAssignment(name, { ...a.value, drainNote: NO_ACCESS }, a.resourceVersion, a.createdAt));
    }
    const d = this.cache.drains.get(name);
    if (d?.value.phase === 'Draining' && d.value.reason !== NO_ACCESS) ops.push(this.#put(name, { ...d.value, reason: NO_ACCESS }, d.resourceVersion));
    // Labels and creation times from a cluster this leader cannot see would go stale unnoticed.
    const k = this.cache.kubernetesNodes.get(name);
    if (k) ops.push({ type: 'delete', kind: 'KubernetesNode', name, expectedVersion: k.resourceVersion });
    await this.writer.commitEach(ops, signal);
  }

  /** When the pool has maintenance windows and none is open now: when the next opens. */
  #windowClosed(pool: string): { nextStart: number } | undefined {
    const windows = this.cache.pools.get(pool)?.value.spec.maintenanceWindows;
    if (!windows?.length) return undefined;
    // A held config needs a drain, so it is disruptive: it waits whatever the pool's scope.
    const state = windowState(windows, this.clock.now());
    return state.open || state.nextStart === undefined ? undefined : { nextStart: state.nextStart };
  }

  #put(name: string, value: NodeDrainRecord, expectedVersion: string | null): WriteOp {
    const existing = this.cache.drains.get(name);
    return { type: 'put', kind: 'NodeDrain', name, value, expectedVersion, ...(existing && expectedVersion ? { createdAt: existing.createdAt } : {}) };
  }

  #putAssignment(name: string, value: NodeAssignmentRecord, expectedVersion: string, createdAt: number): WriteOp {
    return { type: 'put', kind: 'NodeAssignment', name, value, expectedVersion, createdAt };
  }
}

const NO_ACCESS = 'held for a drain: the leader has no Kubernetes access (--kubeconfig); it waits for a leader that can drain the node';


/** The node's reason while it drains: what it waits for, and when it tries again. */
function drainingReason(d: NodeDrainRecord, podCount: number, now: number, timeoutSeconds: number | undefined, pool: string): string {
  const parts: string[] = [];
  const names = d.remaining.slice(0, NAMED_PODS).join(', ') + (podCount > NAMED_PODS ? ` and ${podCount - NAMED_PODS} more` : '');
  if (d.blocked) {
    const b = d.blocked;
    const budget = b.budget ? `PodDisruptionBudget ${b.namespace}/${b.budget}` : 'the API server (429, no budget named)';
    const allows = b.disruptionsAllowed === null ? '' : ` (it allows ${b.disruptionsAllowed} disruption${b.disruptionsAllowed === 1 ? '' : 's'} now)`;
    parts.push(`draining: eviction of pod ${b.namespace}/${b.pod} refused by ${budget}${allows}; attempt ${d.attempt}`);
  } else if (d.failures?.length) {
    parts.push(`draining: eviction failed for ${d.failures.slice(0, NAMED_PODS).join('; ')}; attempt ${d.attempt}`);
  } else {
    parts.push(`draining: waiting for ${podCount} pod${podCount === 1 ? '' : 's'} to terminate (${names})`);
  }
  if (d.nextRetryAt !== undefined && (d.blocked || d.failures?.length)) {
    parts.push(`next retry at ${new Date(d.nextRetryAt).toISOString()} (in ${formatDuration(d.nextRetryAt - now)})`);
    parts.push(`${podCount} pod${podCount === 1 ? '' : 's'} left (${names})`);
  }
  if (d.timedOut) {
    parts.push(`drain exceeded pool ${pool}'s timeout of ${formatDuration((timeoutSeconds ?? 0) * 1000)}${d.degraded ? ' (onTimeout: Degrade)' : ', still waiting (onTimeout: Wait)'}`);
  }
  if (d.recordoned > 0) parts.push(`uncordoned by someone during the drain, cordoned again (${d.recordoned}×)`);
  return parts.join('; ');
}

