// Which nodes of a pool receive the pool's target config next (MCO's node controller).

import { resolveMaxUnavailable } from './max-unavailable.ts';
import { isDegraded, unavailableReason } from './node-availability.ts';
import { canaryGate, type CanaryGate } from './canary.ts';
import type { UpdateAction } from './config-diff.ts';
import { GroupBudget } from './disruption-budget.ts';
import { waitsForWindow, windowState } from './maintenance-window.ts';
import { activeHalt, effectiveTarget, type RolloutState } from './rollout-failures.ts';
import { rolloutOrder } from './rollout-order.ts';
import { resolveMaxStaging } from './staging.ts';
import type { MachineConfigPool, NodeRecord } from './types.ts';

/** What decisions read besides the pool and its nodes: the time, what each update costs, and the leader's rollout bookkeeping. */
export interface RolloutContext {
  /** The control plane's clock (maintenance windows, the canaries' soak). */
  now: number;
  /** The node's update to the target; undefined when unknown, which counts as a reboot. */
  actionOf?: (node: NodeRecord) => UpdateAction | undefined;
  /** spec.rollout: the canaries' soak and the circuit breaker's halt (rollout-failures.ts). */
  rolloutState?: RolloutState;
  /**
   * Staging before the drain (staging.ts): what each node reported of the target. Absent: no
   * staging (every node may be disrupted at once, as before).
   */
  staging?: {
    /** Staged for the target, or nothing to download: the node may be disrupted. */
    ready: (node: NodeRecord) => boolean;
    /** Asked to stage the target already (its assignment carries it). */
    requested: (node: NodeRecord) => boolean;
  };
}

/** The part of the context spec.rollout reads. */
export type RolloutSafetyInput = Pick<RolloutContext, 'now' | 'rolloutState'>;

/** Updates that drain or reboot: what maintenance windows hold back by default. */
export function isDisruptive(action: UpdateAction | undefined): boolean {
  return action === undefined || action === 'reboot' || action === 'drain';
}

export interface RolloutDecision {
  /** Nodes to hand the target to now, in order. */
  assign: string[];
  maxUnavailable: number;
  unavailable: number;
  /** Nodes still waiting for the target, when the budget or the pause holds them back. */
  waiting: number;
  /** Nodes whose update waits for the pool's next maintenance window. */
  heldForWindow: string[];
  /** When the next window opens, when nodes wait for it: the controller runs again then. */
  nextWindowStart?: number;
  /** Nodes the pool's budget would take but their group's disruption budget holds back. */
  heldByGroupBudget: string[];
  /** The config assigned: the target, or the config a rollback returns to (spec.rollout). */
  target?: string;
  /** The canary gate, when the pool has canaries and is not halted. */
  canary?: CanaryGate;
  /** Nodes to ask to stage the target now (within maxStaging and the download windows). */
  stage: string[];
  /** Nodes the budget would take but that have not staged the target yet: they go once Staged. */
  awaitingStage: string[];
  /** Nodes asked to stage the target and not staged yet: they download now. */
  downloading: number;
  maxStaging: number;
  /** When the next download window opens, when nodes wait for one. */
  nextDownloadWindowStart?: number;
}

/**
 * At most maxUnavailable nodes may be unavailable at once; nodes that are updating,
 * disconnected or degraded already use up that budget. Candidates go in MCO's order: by zone
 * label, then oldest registration first.
 *
 * Two additions to MCO: a node that never had a config (a new host) gets the target at once,
 * since it serves nothing yet; and a degraded node that is not on the target gets it without
 * spending budget, since it is unavailable already, so a fix can reach it (MCO leaves it stuck).
 * A node still updating to an earlier config may take the target in its place, but within the
 * budget (see below).
 */
export function decideRollout(pool: MachineConfigPool, renderedTarget: string, nodes: readonly NodeRecord[], context: RolloutContext = { now: Date.now() }): RolloutDecision {
  // spec.rollout: a halted pool assigns nothing (Pause) or sends its nodes back (Rollback); the
  // rules are in rollout-failures.ts and canary.ts.
  const halt = activeHalt(context.rolloutState, renderedTarget);
  const target = effectiveTarget(context.rolloutState, renderedTarget);
  const gate = context.rolloutState && !halt ? canaryGate(pool, target, nodes, context.rolloutState.soak, context.now) : undefined;
  const maxUnavailable = resolveMaxUnavailable(pool.spec.maxUnavailable, nodes.length);
  const unavailable = nodes.filter((n) => unavailableReason(n) !== undefined).length;
  const pending = nodes.filter((n) => n.desiredConfig !== target);
  const maxStaging = resolveMaxStaging(pool.spec.rollout?.maxStaging, nodes.length);
  const noStaging = { stage: [], awaitingStage: [], downloading: 0, maxStaging };
  if (pool.spec.paused || !target || (halt && target === renderedTarget)) return { assign: [], maxUnavailable, unavailable, waiting: pending.length, heldForWindow: [], heldByGroupBudget: [], target, ...noStaging };
  // Windows hold drains and reboots (every update with scope All) while they are closed.
  const windows = pool.spec.maintenanceWindows?.length ? windowState(pool.spec.maintenanceWindows, context.now) : undefined;
  const held: NodeRecord[] = [];
  const mayStartNow = (n: NodeRecord): boolean => !windows || windows.open || !waitsForWindow(pool.spec, isDisruptive(context.actionOf?.(n)));

  const fresh: NodeRecord[] = [];
  const free: NodeRecord[] = [];
  const updating: NodeRecord[] = [];
  const budgeted: NodeRecord[] = [];
  for (const n of pending) {
    if (!n.connected) continue; // it gets the target when it returns and is a candidate again
    if (!n.status.currentConfig && !n.desiredConfig) fresh.push(n);
    else if (gate && !gate.open && !gate.canaries.has(n.name)) continue; // after the canaries' soak
    else if (!mayStartNow(n)) held.push(n);
    else if (isDegraded(n)) free.push(n);
    else if (unavailableReason(n) !== undefined) updating.push(n);
    else budgeted.push(n);
  }
  // "Updating" is what the store last heard, and the node's Done may be on its way (reports are
  // written in batches): a node that has in fact finished goes down again for the target. So an
  // updating node takes the target within the budget, counted as if it were available, before
  // the available ones. For free, new hosts that had all just finished their first config would
  // all start the next one together.
  // Staging: a node is disrupted only once it has downloaded the target; until then it neither
  // takes nor holds budget, and the next staged node in order goes in its place.
  const staging = context.staging;
  const ready = (n: NodeRecord): boolean => !staging || staging.ready(n);
  const awaiting: NodeRecord[] = [];
  const capacity = Math.max(0, maxUnavailable - (unavailable - updating.length));
  const switched = updating.sort(rolloutOrder).filter((n) => ready(n) || (awaiting.push(n), false)).slice(0, capacity);
  const groups = pool.spec.disruptionBudget && new GroupBudget(pool.spec.disruptionBudget, nodes, (n) => unavailableReason(n) !== undefined);
  const taken: NodeRecord[] = [];
  const heldByGroupBudget: string[] = [];
  const notTaken: NodeRecord[] = [];
  for (const n of budgeted.sort(rolloutOrder)) {
    if (switched.length + taken.length >= capacity) {
      notTaken.push(n);
      continue;
    }
    if (!ready(n)) awaiting.push(n);
    else if (groups && !groups.take(n)) heldByGroupBudget.push(n.name);
    else taken.push(n);
  }
  const chosen = [...fresh, ...free, ...switched, ...taken];
  // Who downloads now: the nodes the budget waits on first, then the rest the rollout will reach
  // (beyond the budget, or held for a maintenance window: staged in the night, applied on Saturday).
  let stage: string[] = [];
  let downloading = 0;
  let nextDownloadWindowStart: number | undefined;
  if (staging) {
    const unready = [...awaiting, ...[...notTaken, ...held].sort(rolloutOrder)].filter((n) => !ready(n));
    downloading = unready.filter((n) => staging.requested(n)).length;
    const asked = unready.filter((n) => !staging.requested(n));
    const downloadWindows = pool.spec.downloadWindows?.length ? windowState(pool.spec.downloadWindows, context.now) : undefined;
    if (downloadWindows && !downloadWindows.open) {
      if (asked.length) nextDownloadWindowStart = downloadWindows.nextStart;
    } else {
      stage = asked.slice(0, Math.max(0, maxStaging - downloading)).map((n) => n.name);
    }
  }
  return {
    assign: chosen.map((n) => n.name), maxUnavailable, unavailable, waiting: pending.length - chosen.length,
    heldForWindow: held.sort(rolloutOrder).map((n) => n.name),
    ...(held.length && windows?.nextStart !== undefined ? { nextWindowStart: windows.nextStart } : {}),
    heldByGroupBudget,
    target,
    ...(gate ? { canary: gate } : {}),
    stage, awaitingStage: awaiting.map((n) => n.name), downloading, maxStaging,
    ...(nextDownloadWindowStart !== undefined ? { nextDownloadWindowStart } : {}),
  };
}

