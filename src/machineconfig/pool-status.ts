// A pool's status with MCO's counts and conditions, and messages that name nodes and causes:
// MCO's "Degraded" with an empty message is exactly what mcplane is here to avoid.

import { formatProblem, type Problem } from './errors.ts';
import { isDegraded, isReady, isUpdated, unavailableReason } from './node-availability.ts';
import { resolveMaxUnavailable } from './max-unavailable.ts';
import { formatWait, windowState } from './maintenance-window.ts';
import { describeHalt, type RolloutHalt } from './rollout-failures.ts';
import type { Condition, ConditionStatus, MachineConfigPool, NodeRecord, PoolStatus } from './types.ts';

export interface PoolStatusInput {
  pool: MachineConfigPool;
  /** The rendered config the pool targets, "" before the first successful render. */
  target: string;
  targetSources: string[];
  nodes: readonly NodeRecord[];
  /** Set when the latest render failed; the target stays the last good one. */
  renderProblems?: Problem[];
  previous?: readonly Condition[];
  now: number;
  /**
   * The drains running on the pool's nodes, given once the cluster's Nodes are known (Kubernetes
   * access): the pool then carries a NodeDrainStalled condition.
   */
  drains?: readonly DrainInProgress[];
  /** After this long a drain counts as stalled (the pool's spec.drain.stalledAfterSeconds). */
  drainStalledAfterMs?: number;
  /** What the rollout holds back now (decideRollout), for the Updating condition's message. */
  rollout?: { heldForWindow: string[]; heldByGroupBudget: string[]; nextWindowStart?: number };
  /** spec.rollout: the breaker's halt in force (Rollback: `target` is the config returned to). */
  halt?: RolloutHalt;
  /** spec.rollout: why the nodes that are not canaries wait (canary-gate's words). */
  canaryWait?: string;
}

export interface DrainInProgress {
  node: string;
  startedAt: number;
  reason: string;
}

export const DEFAULT_DRAIN_STALLED_AFTER_MS = 600_000;

const LIST_LIMIT = 10;

export function computePoolStatus(input: PoolStatusInput): PoolStatus {
  const { pool, target, nodes } = input;
  const updated = nodes.filter((n) => isUpdated(n, target));
  const ready = nodes.filter((n) => isReady(n, target));
  const unavailable = nodes.filter((n) => unavailableReason(n) !== undefined);
  const degraded = nodes.filter(isDegraded);
  const allUpdated = target !== '' && updated.length === nodes.length;
  const renderFailed = (input.renderProblems?.length ?? 0) > 0;

  const conditions: Omit<Condition, 'lastTransitionTime'>[] = [];
  const add = (type: string, status: ConditionStatus, reason: string, message: string): void => {
    conditions.push({ type, status, reason, message });
  };

  if (renderFailed) {
    const keeping = target ? `; nodes keep ${target}` : '';
    add('RenderDegraded', 'True', 'RenderFailed',
      `failed to render the pool's MachineConfigs${keeping}: ${input.renderProblems!.map(formatProblem).join('; ')}`);
  } else {
    add('RenderDegraded', 'False', 'Rendered', target ? `rendered ${target} from ${input.targetSources.length} MachineConfigs` : 'nothing rendered yet');
  }

  if (degraded.length > 0) {
    add('NodeDegraded', 'True', 'NodesDegraded',
      `${degraded.length} node${degraded.length === 1 ? ' is' : 's are'} degraded: ${list(degraded, (n) => `${n.name} (${n.status.state}: ${n.status.reason || 'no reason reported'})`)}`);
  } else {
    add('NodeDegraded', 'False', 'NoNodesDegraded', 'no node is degraded');
  }

  // Staging before the drain: a node whose download of the target failed keeps serving on its
  // config (it is not Degraded itself, which would spend budget); the pool says so, naming each
  // node's image and cause. The condition is there only while one fails.
  const stagingFailed = nodes.filter((n) => n.status.staging?.state === 'Failed' && n.status.staging.config === target && n.status.currentConfig !== target);
  if (stagingFailed.length > 0) {
    add('StagingDegraded', 'True', 'StagingFailed',
      `${stagingFailed.length} node${stagingFailed.length === 1 ? '' : 's'} could not stage ${target} and keep${stagingFailed.length === 1 ? 's' : ''} serving on ${stagingFailed.length === 1 ? 'its' : 'their'} config: ${list(stagingFailed, (n) => `${n.name} (${n.status.staging!.reason})`)}`);
  }
  const degradedCauses = conditions.filter((c) => (c.type === 'RenderDegraded' || c.type === 'NodeDegraded' || c.type === 'StagingDegraded') && c.status === 'True');
  if (degradedCauses.length > 0) add('Degraded', 'True', degradedCauses.map((c) => c.reason).join(','), degradedCauses.map((c) => c.message).join(' | '));
  else add('Degraded', 'False', 'NotDegraded', 'the pool renders and no node is degraded');

  if (allUpdated) add('Updated', 'True', 'AllNodesUpdated', `all ${nodes.length} nodes are updated to ${target}`);
  else add('Updated', 'False', 'NodesNotUpdated', target ? `${updated.length} of ${nodes.length} nodes are updated to ${target}` : 'no rendered config yet');

  const behind = nodes.filter((n) => !isUpdated(n, target));
  if (pool.spec.paused) {
    add('Updating', 'False', 'Paused', behind.length
      ? `the pool is paused: ${behind.length} node${behind.length === 1 ? '' : 's'} wait${behind.length === 1 ? 's' : ''} for ${target || 'a rendered config'} (${list(behind, (n) => n.name)}); resume it to continue`
      : `the pool is paused; every node is on ${target}`);
  } else if (input.halt) {
    const { reason, message } = describeHalt(pool.metadata.name, input.halt, pool.spec.rollout?.maxFailures ?? 0);
    add('Updating', 'False', reason, message);
  } else if (!allUpdated && target) {
    const inProgress = nodes.filter((n) => n.desiredConfig === target && !isUpdated(n, target));
    const budget = resolveMaxUnavailable(pool.spec.maxUnavailable, nodes.length);
    const detail = inProgress.length ? `; updating now: ${list(inProgress, (n) => `${n.name} (${unavailableReason(n) ?? n.status.phase})`)}` : '';
    const waiting = windowWaitMessage(input);
    const grouped = input.rollout?.heldByGroupBudget ?? [];
    const groupDetail = grouped.length && pool.spec.disruptionBudget
      ? `; held by the disruption budget (at most ${pool.spec.disruptionBudget.maxUnavailable} unavailable per ${pool.spec.disruptionBudget.groupBy.join(',')} group): ${grouped.slice(0, LIST_LIMIT).join(', ')}${grouped.length > LIST_LIMIT ? ` and ${grouped.length - LIST_LIMIT} more` : ''}`
      : '';
    const canary = input.canaryWait ? `; ${input.canaryWait}, then the rest go` : '';
    if (waiting && inProgress.length === 0) {
      // Nothing moves until the window opens: not updating, and the message says until when.
      add('Updating', 'False', 'WaitingForMaintenanceWindow', `${updated.length} of ${nodes.length} nodes updated to ${target}; ${waiting}`);
    } else {
      add('Updating', 'True', input.canaryWait ? 'Canary' : 'RollingOut',
        `${updated.length} of ${nodes.length} nodes updated to ${target}, at most ${budget} unavailable at a time${detail}${canary}${waiting ? `; ${waiting}` : ''}${groupDetail}`);
    }
  } else {
    add('Updating', 'False', 'NotUpdating', target ? 'no update in progress' : 'nothing to roll out yet');
  }

  if (input.drains) {
    const after = input.drainStalledAfterMs ?? DEFAULT_DRAIN_STALLED_AFTER_MS;
    const stalled = input.drains.filter((d) => input.now - d.startedAt >= after);
    if (stalled.length > 0) {
      add('NodeDrainStalled', 'True', 'DrainStalled',
        `${stalled.length} node${stalled.length === 1 ? ' has' : 's have'} been draining for longer than ${formatDuration(after)}: ${stalled.slice(0, LIST_LIMIT).map((d) => `${d.node} (since ${new Date(d.startedAt).toISOString()}: ${d.reason})`).join(', ')}${stalled.length > LIST_LIMIT ? ` and ${stalled.length - LIST_LIMIT} more` : ''}`);
    } else {
      add('NodeDrainStalled', 'False', 'NoDrainStalled', input.drains.length
        ? `${input.drains.length} node${input.drains.length === 1 ? ' is' : 's are'} draining, none for longer than ${formatDuration(after)}`
        : 'no node is draining');
    }
  }

  const window = maintenanceWindowText(input);
  return {
    ...(window ? { maintenanceWindow: window } : {}),
    configuration: target,
    configurationSources: input.targetSources,
    machineCount: nodes.length,
    updatedMachineCount: updated.length,
    readyMachineCount: ready.length,
    unavailableMachineCount: unavailable.length,
    degradedMachineCount: degraded.length,
    conditions: conditions.map((c) => ({ ...c, lastTransitionTime: transitionTime(c, input.previous, input.now) })),
  };
}

/** "2 nodes wait for the next maintenance window to drain or reboot (a, b): it opens at …, in 5h". */
function windowWaitMessage(input: PoolStatusInput): string {
  const held = input.rollout?.heldForWindow ?? [];
  const start = input.rollout?.nextWindowStart;
  if (held.length === 0 || start === undefined) return '';
  const what = input.pool.spec.maintenanceWindowScope === 'All' ? 'update' : 'drain or reboot';
  const shown = held.slice(0, LIST_LIMIT).join(', ') + (held.length > LIST_LIMIT ? ` and ${held.length - LIST_LIMIT} more` : '');
  return `${held.length} node${held.length === 1 ? ' waits' : 's wait'} for the next maintenance window to ${what} (${shown}): it opens at ${isoMinute(start)}, in ${formatWait(start - input.now)}`;
}

function maintenanceWindowText(input: PoolStatusInput): string {
  const windows = input.pool.spec.maintenanceWindows;
  if (!windows?.length) return '';
  const state = windowState(windows, input.now);
  if (state.open) return `open until ${isoMinute(state.closesAt!)}`;
  if (state.nextStart === undefined) return 'no window ahead';
  const waiting = (input.rollout?.heldForWindow.length ?? 0) > 0;
  return `next ${isoMinute(state.nextStart)}${waiting ? ` (in ${formatWait(state.nextStart - input.now)})` : ''}`;
}

function isoMinute(ms: number): string {
  return new Date(ms).toISOString().slice(0, 16) + 'Z';
}

export function conditionOf(status: PoolStatus, type: string): Condition | undefined {
  return status.conditions.find((c) => c.type === type);
}

function transitionTime(c: Omit<Condition, 'lastTransitionTime'>, previous: readonly Condition[] | undefined, now: number): number {
  const before = previous?.find((p) => p.type === c.type);
  return before && before.status === c.status ? before.lastTransitionTime : now;
}

function list(nodes: readonly NodeRecord[], show: (n: NodeRecord) => string): string {
  const shown = nodes.slice(0, LIST_LIMIT).map(show).join(', ');
  return nodes.length > LIST_LIMIT ? `${shown} and ${nodes.length - LIST_LIMIT} more` : shown;
}

/** 90 s -> "1m30s", 600000 ms -> "10m", 150 ms -> "150ms": short, as kubectl shows ages. */
export function formatDuration(ms: number): string {
  if (ms > 0 && ms < 1000) return `${Math.round(ms)}ms`;
  let s = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return `${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s || (!h && !m) ? `${s}s` : ''}`;
}
