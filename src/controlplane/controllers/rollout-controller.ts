// Hands each pool's target to its nodes within maxUnavailable (decideRollout has the rules) by
// writing the nodes' desired config into the store. It sends nothing: the replica holding each
// node's stream sees the write and sends the assignment. Because the decision rests on stored
// state only, a node assigned a config it has not reached counts against the budget whoever
// assigned it, across a failover too.
//
// For spec.rollout it also keeps the pool's rollout bookkeeping in the PoolStatus record (the
// leader's, never the user's spec): the last config every node reached, when the canaries'
// soak began, and the circuit breaker's halt. It asks to run again when a soak ends.

import { activeHalt, decideRollout, effectiveTarget, isDisruptive, needsStaging, nextRolloutState, stagingEnabled, waitsForWindow, windowState, type NodeRecord, type RolloutContext, type RolloutState } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import { PoolKeys } from './pool-keys.ts';
import type { Clock } from '../replica/clock.ts';
import { MAX_REQUEUE_MS, type ReconcileResult } from './controller.ts';
import type { KeyedController } from './reconciler.ts';
import { drainDecision, withoutDrainHold, type DrainAccess } from './drain-gate.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import { agentPolicyFor, disruptionPolicyJsonFor, type AgentPolicy, planNodeUpdate, rolloutContext } from '../cache/node-update-plan.ts';
import type { WriteOp } from '../store/store.ts';
import type { NodeAssignmentRecord } from '../store/stored-records.ts';
import { pinnedImageSetsFor } from '../cache/pinned-image-sets-for.ts';

export class RolloutController implements KeyedController<string> {
  readonly name = 'rollout';
  readonly leaderOnly = true;
  /** Pools decided at once: one pool's writes never wait for another's. */
  readonly concurrency = 4;
  /**
   * A pass looks at every node of the pool (and every assignment): while reports stream in, at
   * most one pass per 50 ms, so a wave's Done reports move the rollout on within that, not one
   * pass per batch of reports stored.
   */
  readonly minIntervalMs = 50;
  /** Re-decisions that wait for a window, each logged once. */
  #toldWaitingForWindow = new Set<string>();
  readonly #poolKeys: PoolKeys;

  private readonly cache: ClusterCache;
  private readonly writer: LeaderWriter;
  /** For time-driven decisions (windows, soaks). */
  protected readonly clock: Clock;
  private readonly log: Logger;
  /** Set with Kubernetes access: a config that needs a drain is written held until drained. */
  private readonly drains?: DrainAccess;
  constructor(
    cache: ClusterCache,
    writer: LeaderWriter,
    clock: Clock,
    log: Logger,
    drains?: DrainAccess,
  ) {
    this.cache = cache;
    this.writer = writer;
    this.clock = clock;
    this.log = log;
    this.drains = drains;
    this.#poolKeys = new PoolKeys(cache, ['MachineConfiguration']);
  }

  /** The pools a change concerns; the cluster's disruption policy concerns every pool's updates under way. */
  keysFor(change: CacheChange): Iterable<string> {
    return this.#poolKeys.of(change);
  }

  async reconcile(name: string, signal: AbortSignal): Promise<ReconcileResult> {
    const ops: WriteOp[] = [];
    const now = this.clock.now();
    // When to run again without a change: a maintenance window opening, a canaries' soak ending.
    let requeueAt: number | undefined;
    const stored = this.cache.pools.get(name);
    const target = this.cache.poolTarget(name);
    if (stored && target) {
      const nodes = this.cache.nodesInPool(name);
      const record = this.cache.poolStatuses.get(name);
      const state = this.#rolloutState(name, target, nodes, record?.value.rollout, now, stored.value);
      const staging = stagingEnabled(stored.value) ? stagingGate(this.cache, effectiveTarget(state, target)) : undefined;
      const decision = decideRollout(stored.value, target, nodes, { ...rolloutContext(this.cache, now, target), rolloutState: state, ...(staging ? { staging } : {}) });
      if (decision.canary) state.soak = decision.canary.soak;
      if (!state.soak) delete state.soak;
      if (decision.canary?.soakEndsAt !== undefined) requeueAt = Math.min(requeueAt ?? Infinity, decision.canary.soakEndsAt);
      // Nodes held for a window go when it opens: run again then, not at the next change.
      if (decision.nextWindowStart !== undefined) requeueAt = Math.min(requeueAt ?? Infinity, decision.nextWindowStart);
      if (decision.heldForWindow.length && decision.assign.length === 0) {
        this.log.debug({ pool: name, waiting: decision.heldForWindow.length, nextWindowStart: decision.nextWindowStart && new Date(decision.nextWindowStart).toISOString() }, 'waiting for maintenance window');
      }
      if (record && JSON.stringify(state) !== JSON.stringify(record.value.rollout ?? {})) {
        await this.writer.commit([{ type: 'put', kind: 'PoolStatus', name, value: { ...record.value, rollout: state }, expectedVersion: record.resourceVersion, createdAt: record.createdAt }], signal);
      }
      const resume = this.cache.poolResumes.get(name);
      if (resume) ops.push({ type: 'delete', kind: 'PoolResume', name, expectedVersion: resume.resourceVersion });
      if (decision.assign.length > 0) ops.push(...this.#assign(name, decision.target ?? target, decision));
      if (decision.stage.length > 0) ops.push(...this.#stage(name, decision.target ?? target, decision));
      if (decision.nextDownloadWindowStart !== undefined) requeueAt = Math.min(requeueAt ?? Infinity, decision.nextDownloadWindowStart);
      if (decision.awaitingStage.length && decision.assign.length === 0) {
        this.log.debug({ pool: name, awaitingStage: decision.awaitingStage.length, downloading: decision.downloading }, 'waiting for nodes to stage the target before disrupting them');
      }
    }
    const redecided = this.#redecideUnderNewPolicy(name, now, new Set(ops.map((op) => op.name)));
    ops.push(...redecided.ops);
    ops.push(...this.#followAgentPolicy(name, new Set(ops.map((op) => op.name))));
    ops.push(...this.#collectConfigTries(name));
    if (redecided.windowOpensAt !== undefined) requeueAt = Math.min(requeueAt ?? Infinity, redecided.windowOpensAt);
    await this.writer.commitEach(ops, signal);
    // setTimeout fires at once beyond 2^31 ms: a far window is looked at again within hours.
    return requeueAt === undefined ? {} : { requeueAfterMs: Math.min(Math.max(10, requeueAt - now), MAX_REQUEUE_MS) };
  }

  /**
   * Staging: the nodes picked to download `target` ahead of their disruption get it as
   * stageConfig beside the config they run; nothing else of their assignment changes.
   */
  #stage(name: string, target: string, decision: ReturnType<typeof decideRollout>): WriteOp[] {
    this.log.info({ pool: name, target, nodes: decision.stage.length <= 20 ? decision.stage : `${decision.stage.length} nodes`, downloading: decision.downloading, maxStaging: Number.isFinite(decision.maxStaging) ? decision.maxStaging : 'all' }, 'staging: nodes download the target ahead of their drain');
    return decision.stage.flatMap((node) => {
      const assignment = this.cache.assignments.get(node);
      if (!assignment) return [];
      return [{ type: 'put' as const, kind: 'NodeAssignment' as const, name: node, value: { ...assignment.value, stageConfig: target }, expectedVersion: assignment.resourceVersion, createdAt: assignment.createdAt }];
    });
  }

  /** The assignments that hand `sendTo` to the nodes the decision picked, each held for a drain where it needs one. */
  #assign(name: string, sendTo: string, decision: ReturnType<typeof decideRollout>): WriteOp[] {
    const ops: WriteOp[] = [];
    // Nodes whose update would need a drain that cannot be decided yet: said once per pass.
    const waiting: string[] = [];
    let waitReason = '';
    this.log.info({ pool: name, target: sendTo, nodes: decision.assign.length <= 20 ? decision.assign : `${decision.assign.length} nodes`, maxUnavailable: decision.maxUnavailable, waiting: decision.waiting }, 'assigning config');
    // What the drains below are decided with, and what the agents will plan with.
    const policyJson = disruptionPolicyJsonFor(this.cache, name);
    const agentPolicy = agentPolicyFor(this.cache, name, sendTo);
    for (const node of decision.assign) {
      const assignment = this.cache.assignments.get(node)!;
      const drain = drainDecision(this.cache, this.cache.nodes.get(node)!, sendTo, this.drains);
      if ('wait' in drain) {
        waiting.push(node);
        waitReason = drain.wait;
        continue;
      }
      const { stageConfig: _staged, ...rest } = withoutDrainHold(assignment.value);
      const value: NodeAssignmentRecord = { ...rest, desiredConfig: sendTo, disruptionPolicyJson: policyJson, ...agentPolicy };
      if (drain.hold) value.holdForDrain = true;
      else if (drain.note) value.drainNote = drain.note;
      if (drain.hold) this.log.info({ node, target: sendTo }, 'config held until the node is drained');
      else if (drain.note) this.log.info({ node, target: sendTo, reason: drain.note }, 'config assigned without drain');
      ops.push({
        type: 'put', kind: 'NodeAssignment', name: node, value,
        expectedVersion: assignment.resourceVersion, createdAt: assignment.createdAt,
      });
    }
    if (waiting.length) this.log.info({ pool: name, nodes: waiting.length <= 20 ? waiting : `${waiting.length} nodes`, reason: waitReason }, 'assignments wait: they may need a drain');
    return ops;
  }

  /**
   * An update handed out under one disruption policy whose policy changed before the node
   * finished it (it was disconnected, or Degraded and about to retry): the new policy may make it
   * a reboot nobody drained for, or outside the pool's window. Its assignment takes the new
   * policy only with the gates decided again, in the same write: held for a drain when the new
   * plan needs one, and not at all while the window the new plan would wait for is closed (the
   * node keeps the policy it has until the window opens). Left alone, as the rollout would leave
   * them: a node Done on its config (it never plans with it again: a re-apply of the same config
   * disrupts nothing; its next config brings the policy of that moment), a node Working on it
   * (its plan is in its journal), a node RolledBack from it (it does not take it again unasked),
   * and the nodes of a paused pool or one its circuit breaker paused. Records from before the
   * policy was stored with them count as changed.
   */
  #redecideUnderNewPolicy(poolName: string, now: number, alreadyWritten: ReadonlySet<string>): { ops: WriteOp[]; windowOpensAt?: number } {
    const ops: WriteOp[] = [];
    let windowOpensAt: number | undefined;
    if (this.#toldWaitingForWindow.size > 10_000) this.#toldWaitingForWindow.clear();
    let live: string | undefined;
    const rendered = this.cache.rendered;
    for (const [name, stored] of this.cache.assignments) {
      const a = stored.value;
      if (!a.desiredConfig || a.holdForDrain || alreadyWritten.has(name)) continue;
      // Decided in the pool of the config it was handed, wherever the node is now. A config not
      // yet in the cache is on its way: its RenderedConfig event brings its pool back here.
      if (rendered.get(a.desiredConfig)?.value.pool !== poolName) continue;
      live ??= disruptionPolicyJsonFor(this.cache, poolName);
      if (live === a.disruptionPolicyJson) continue;
      const node = this.cache.nodes.get(name);
      const pool = this.cache.pools.get(poolName)?.value;
      if (!node || !pool || pool.spec.paused) continue;
      // What the agent itself reported: the node's view shows a node that has not taken its
      // assignment yet as Working on it, and this decision is about what the agent has started.
      const s = this.cache.nodeStatuses.get(name)?.value.status ?? node.status;
      if (s.state === 'Done' && s.currentConfig === a.desiredConfig) continue;
      if ((s.state === 'Working' || s.state === 'RolledBack' || s.state === 'TryReverted') && s.desiredConfig === a.desiredConfig) continue;
      if (activeHalt(this.cache.poolStatuses.get(poolName)?.value.rollout, this.cache.poolTarget(poolName))?.action === 'Pause') continue;
      if (pool.spec.maintenanceWindows?.length) {
        const windows = windowState(pool.spec.maintenanceWindows, now);
        if (!windows.open && waitsForWindow(pool.spec, isDisruptive(planNodeUpdate(this.cache, node, a.desiredConfig)?.action))) {
          if (windows.nextStart !== undefined) windowOpensAt = Math.min(windowOpensAt ?? Infinity, windows.nextStart);
          const key = `${name}\n${a.desiredConfig}\n${live}`;
          if (!this.#toldWaitingForWindow.has(key)) {
            this.#toldWaitingForWindow.add(key);
            this.log.info({ node: name, config: a.desiredConfig, nextWindowStart: windows.nextStart && new Date(windows.nextStart).toISOString() }, 'the disruption policy changed before the node finished its update; under the new one it waits for the maintenance window, and keeps the policy it has until then');
          }
          continue;
        }
      }
      const drain = drainDecision(this.cache, node, a.desiredConfig, this.drains);
      if ('wait' in drain) continue;
      const value: NodeAssignmentRecord = { ...withoutDrainHold(a), disruptionPolicyJson: live, ...agentPolicyFor(this.cache, poolName, a.desiredConfig) };
      if (drain.hold) value.holdForDrain = true;
      else if (drain.note) value.drainNote = drain.note;
      this.log.info({ node: name, config: a.desiredConfig, heldForDrain: drain.hold }, 'the disruption policy changed before the node finished its update; decided again under the new one');
      ops.push({ type: 'put', kind: 'NodeAssignment', name, value, expectedVersion: stored.resourceVersion, createdAt: stored.createdAt });
    }
    return windowOpensAt === undefined ? { ops } : { ops, windowOpensAt };
  }

  /**
   * The pool's drift policy and health check into every assignment to one of its configs that
   * does not carry them as they stand: unlike the disruption policy they govern what the agent
   * does from now on, not how an update was decided, so they reach every node at once, paused
   * pool, held or finished update alike (as MCO's drift detection follows its config). Records
   * from before they were stored are filled in here too.
   */
  #followAgentPolicy(poolName: string, alreadyWritten: ReadonlySet<string>): WriteOp[] {
    const ops: WriteOp[] = [];
    // Per config: an `mcctl apply --try` (ConfigTry) makes one config of the pool tried, not another.
    const policies = new Map<string, AgentPolicy>();
    const rendered = this.cache.rendered;
    for (const [name, stored] of this.cache.assignments) {
      const a = stored.value;
      if (!a.desiredConfig || alreadyWritten.has(name)) continue;
      if (!policies.has(a.desiredConfig)) policies.set(a.desiredConfig, agentPolicyFor(this.cache, poolName, a.desiredConfig));
      const policy = policies.get(a.desiredConfig)!;
      const sameIgnore = (a.driftIgnore ?? []).join('\n') === (policy.driftIgnore ?? []).join('\n');
      if (a.driftPolicy === policy.driftPolicy && a.healthCheckJson === policy.healthCheckJson && sameIgnore && a.tryJson === policy.tryJson) continue;
      if (rendered.get(a.desiredConfig)?.value.pool !== poolName) continue;
      // A driftIgnore the pool dropped goes from the record too (the spread alone would keep it).
      const { driftIgnore: _dropped, ...rest } = a;
      ops.push({ type: 'put', kind: 'NodeAssignment', name, value: { ...rest, ...policy }, expectedVersion: stored.resourceVersion, createdAt: stored.createdAt });
    }
    if (ops.length) this.log.info({ pool: poolName, nodes: ops.length, policies: Object.fromEntries(policies) }, "the pool's drift policy, driftIgnore, health check or try changed; its nodes' assignments follow");
    return ops;
  }

  /**
   * An `mcctl apply --try` lasts while its config can still reach a node: it goes once the pool
   * has rendered past the Apply that wrote it (so a record written before its config is rendered
   * stays) and neither the pool's target nor any node's assignment is that config.
   */
  #collectConfigTries(poolName: string): WriteOp[] {
    const renderedRevision = this.cache.poolStatuses.get(poolName)?.value.renderedRevision ?? 0;
    const target = this.cache.poolTarget(poolName);
    const ops: WriteOp[] = [];
    for (const [config, stored] of this.cache.configTries) {
      if (stored.value.pool !== poolName || renderedRevision < Number(stored.resourceVersion) || config === target) continue;
      if ([...this.cache.assignments.values()].some((a) => a.value.desiredConfig === config || a.value.stageConfig === config)) continue;
      this.log.info({ pool: poolName, config, timeout: stored.value.timeout, requestedBy: stored.value.requestedBy }, 'apply --try over: no node is handed its config any more');
      ops.push({ type: 'delete', kind: 'ConfigTry', name: config, expectedVersion: stored.resourceVersion });
    }
    return ops;
  }

  /** The pool's bookkeeping now: an operator's resume clears the halt first, then the breaker counts. */
  #rolloutState(pool: string, target: string, nodes: ReturnType<ClusterCache['nodesInPool']>, previous: RolloutState | undefined, now: number, spec: Parameters<typeof nextRolloutState>[0]): RolloutState {
    let state: RolloutState = { ...previous };
    const resume = this.cache.poolResumes.get(pool);
    if (resume && state.halt && state.halt.target === resume.value.target) {
      // The failures the operator resumed past are not counted again on this target.
      const forgiven = state.forgiven?.target === state.halt.target ? state.forgiven.nodes : [];
      this.log.warn({ pool, target: state.halt.target, failed: state.halt.failed.map((f) => f.node) }, 'rollout halt cleared by an operator');
      state = { ...state, forgiven: { target: state.halt.target, nodes: [...new Set([...forgiven, ...state.halt.failed.map((f) => f.node)])] } };
      delete state.halt;
    }
    const next = nextRolloutState(spec, target, nodes, state, now);
    if (next.halt && !state.halt) {
      this.log.error({ pool, target, action: next.halt.action, rollbackTo: next.halt.rollbackTo || undefined, failed: next.halt.failed }, 'rollout halted: too many nodes failed');
    }
    return next;
  }
}

/**
 * What the rollout reads of staging for `target`: a node is ready for its disruption once it
 * reported Staged for the target, or when its update downloads nothing (files and kernel
 * arguments only) and its pool's pinned image sets are pulled, or when its agent does not stage
 * (it does not say "staging" in its features). The pinned image sets are part of staging: a node
 * that has not pulled every set of its pool (at the set's generation) is asked to stage, and is
 * ready only once it is Staged and the sets are pulled, so its drain waits for them. A config not
 * in the cache yet counts as needing staging.
 */
export function stagingGate(cache: ClusterCache, target: string): NonNullable<RolloutContext['staging']> {
  const to = cache.renderedConfig(target);
  const needs = new Map<string, boolean>();
  const sets = to ? pinnedImageSetsFor(cache, to.pool) : [];
  const pinnedPulled = (n: NodeRecord): boolean => sets.every((want) => {
    const s = n.status.pinnedImageSets?.find((r) => r.name === want.name);
    return s !== undefined && s.state === 'Pulled' && s.currentGeneration >= Number(want.generation ?? 0);
  });
  return {
    ready: (n: NodeRecord): boolean => {
      // An agent from before staging never reports Staged: it downloads during its update, as before.
      if (!n.status.agentFeatures?.includes('staging')) return true;
      const pinned = pinnedPulled(n);
      const from = n.status.currentConfig;
      let need = needs.get(from);
      if (need === undefined) {
        const spec = from ? cache.renderedConfig(from)?.spec : undefined;
        need = !to || (from !== '' && !spec) || needsStaging(spec, to.spec);
        needs.set(from, need);
      }
      if (!need && pinned) return true;
      const s = n.status.staging;
      return s?.config === target && s.state === 'Staged' && pinned;
    },
    requested: (n: NodeRecord): boolean => cache.assignments.get(n.name)?.value.stageConfig === target,
  };
}
