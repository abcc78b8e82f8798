// What a node's update from the config it runs to a target costs it, computed on the control
// plane with the same pure functions the agent runs (diffSpecs, planDisruption), so the control
// plane can gate on it (drains, maintenance windows) and show it (the dry-run preview) before
// anything reaches the host.

import {
  diffSpecs,
  effectiveTry,
  mergeLifecycleHooks,
  parseHooksAnnotation,
  ProblemCollector,
  type LifecycleHooks,
  mergeDisruptionPolicies,
  planDisruption,
  updateActionOf,
  type ConfigDiff,
  type DisruptionPlan,
  type DisruptionPolicy,
  type DriftPolicy,
  type MachineConfigSpec,
  type NodeRecord,
  type RolloutContext,
  type UpdateAction,
} from '../../machineconfig/index.ts';
import type { ClusterCache } from './cluster-cache.ts';

export interface NodeUpdatePlan {
  from: string;
  to: string;
  diff: ConfigDiff;
  plan: DisruptionPlan;
  action: UpdateAction;
}

/** The cluster policy (MachineConfiguration/cluster) with the pool's own entries on top. */
export function disruptionPolicyFor(cache: ClusterCache, pool: string): DisruptionPolicy | undefined {
  return mergeDisruptionPolicies(cache.machineConfiguration?.value.spec.nodeDisruptionPolicy, cache.pools.get(pool)?.value.spec.disruptionPolicy);
}

/**
 * A node's lifecycle hooks for a rendered config: the pool's spec.hooks, then the mcplane.io/hooks
 * annotation of each of the config's sources in name order (each was checked when applied).
 */
export function lifecycleHooksFor(cache: ClusterCache, pool: string, rendered: { sources: readonly string[] } | undefined): LifecycleHooks {
  const configs = (rendered?.sources ?? []).map((name) => {
    const annotations = cache.configs.get(name)?.value.metadata.annotations;
    return { name, hooks: annotations ? parseHooksAnnotation(annotations, new ProblemCollector(`MachineConfig/${name}`)) : undefined };
  });
  return mergeLifecycleHooks(cache.pools.get(pool)?.value.spec.hooks, configs);
}

/** The hooks as the assignment carries them: JSON, "" for none. */
export function lifecycleHooksJsonFor(cache: ClusterCache, pool: string, rendered: { sources: readonly string[] } | undefined): string {
  const hooks = lifecycleHooksFor(cache, pool, rendered);
  return Object.keys(hooks).length ? JSON.stringify(hooks) : '';
}

/** The same as the agent receives it: JSON, or "" when neither the cluster nor the pool has one. */
export function disruptionPolicyJsonFor(cache: ClusterCache, pool: string): string {
  const policy = disruptionPolicyFor(cache, pool);
  return policy ? JSON.stringify(policy) : '';
}

/** What the agent runs a config of `pool` with besides its disruption policy, as it receives it. */
export interface AgentPolicy {
  driftPolicy: DriftPolicy;
  /** JSON, "" when the pool has none. */
  healthCheckJson: string;
  /** The pool's spec.driftIgnore; absent when it has none (so older records need no rewrite). */
  driftIgnore?: string[];
  /** The try (effectiveTry) as JSON, "" when the node does not try. */
  tryJson: string;
}

/**
 * The pool's drift policy and health check as they stand in its spec (the defaults without one),
 * and the try a node handed `config` runs: an `mcctl apply --try` recorded for that config
 * (ConfigTry), else the pool's spec.rollout.confirm.
 */
export function agentPolicyFor(cache: ClusterCache, pool: string, config = ''): AgentPolicy {
  const spec = cache.pools.get(pool)?.value.spec;
  const applied = config ? cache.configTries.get(config)?.value : undefined;
  const tried = spec ? effectiveTry(spec, applied?.pool === pool ? applied.timeout : undefined) : undefined;
  return {
    driftPolicy: spec?.driftPolicy ?? 'Degrade',
    healthCheckJson: spec?.healthCheck ? JSON.stringify(spec.healthCheck) : '',
    ...(spec?.driftIgnore?.length ? { driftIgnore: spec.driftIgnore } : {}),
    tryJson: tried ? JSON.stringify(tried) : '',
  };
}

/**
 * The update `node` would take to reach `target`, or undefined when a rendered config it needs is
 * not in the cache (yet). A node that never had a config plans from nothing, as its agent does.
 */
export function planNodeUpdate(cache: ClusterCache, node: NodeRecord, target: string): NodeUpdatePlan | undefined {
  const to = cache.renderedConfig(target);
  if (!to) return undefined;
  return planNodeUpdateTo(cache, node, to, disruptionPolicyFor(cache, to.pool));
}

/**
 * The same for a config that may not be stored yet (the dry-run preview renders one) under a
 * given policy; undefined when the node's current config is no longer known.
 */
export function planNodeUpdateTo(cache: ClusterCache, node: NodeRecord, to: { name: string; spec: MachineConfigSpec }, policy: DisruptionPolicy | undefined): NodeUpdatePlan | undefined {
  const fromName = node.status.currentConfig;
  const from = fromName ? cache.renderedConfig(fromName) : undefined;
  if (fromName && !from) return undefined;
  const diff = diffSpecs(from?.spec, to.spec);
  const plan = planDisruption(diff, policy);
  return { from: fromName, to: to.name, diff, plan, action: updateActionOf(plan) };
}

/**
 * What the rollout rules read at `now`: each node's update action, planned once per config the
 * nodes run (a pool's nodes mostly share one) and only when a rule asks (a closed window).
 */
export function rolloutContext(cache: ClusterCache, now: number, target: string): RolloutContext {
  const byCurrent = new Map<string, UpdateAction | undefined>();
  return {
    now,
    actionOf: (node) => {
      const from = node.status.currentConfig;
      if (!byCurrent.has(from)) byCurrent.set(from, planNodeUpdate(cache, node, target)?.action);
      return byCurrent.get(from);
    },
  };
}
