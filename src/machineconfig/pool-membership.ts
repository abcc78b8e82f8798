// Which configs feed a pool, and which pool a node belongs to, with MCO's precedence rules.

import { MASTER_POOL, ROLE_LABEL, WORKER_POOL } from './constants.ts';
import { PoolConflictError } from './errors.ts';
import { isEmptySelector, matchesSelector } from './label-selector.ts';
import type { Labels, MachineConfig, MachineConfigPool } from './types.ts';

const byName = (a: MachineConfig, b: MachineConfig): number =>
  a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;

export function isCustomPool(poolName: string): boolean {
  return poolName !== MASTER_POOL && poolName !== WORKER_POOL;
}

/**
 * The configs a pool's machineConfigSelector selects, in merge order: by name, except that a
 * custom pool merges the worker-role configs first and its own after them, so that an infra
 * config named "10-..." still overrides a worker config named "50-..." (MCO does the same).
 */
export function configsForPool(pool: MachineConfigPool, configs: readonly MachineConfig[]): MachineConfig[] {
  const selected = configs.filter((mc) => matchesSelector(pool.spec.machineConfigSelector, mc.metadata.labels));
  if (!isCustomPool(pool.metadata.name)) return selected.sort(byName);
  const isWorker = (mc: MachineConfig): boolean => mc.metadata.labels?.[ROLE_LABEL] === WORKER_POOL;
  return [...selected.filter(isWorker).sort(byName), ...selected.filter((mc) => !isWorker(mc)).sort(byName)];
}

/** A pool's nodeSelector matches a node; an empty selector matches no node (MCO's rule). */
export function poolSelectsNode(pool: MachineConfigPool, labels: Labels | undefined): boolean {
  return !isEmptySelector(pool.spec.nodeSelector) && matchesSelector(pool.spec.nodeSelector, labels);
}

/**
 * The one pool a node belongs to: master beats any custom pool, a custom pool beats worker, and
 * two matching custom pools is an error naming both. Undefined when no pool selects the node.
 */
export function primaryPoolForNode(
  nodeName: string,
  labels: Labels | undefined,
  pools: readonly MachineConfigPool[],
): MachineConfigPool | undefined {
  const matching = pools.filter((p) => poolSelectsNode(p, labels));
  const master = matching.find((p) => p.metadata.name === MASTER_POOL);
  if (master) return master;
  const custom = matching.filter((p) => isCustomPool(p.metadata.name));
  if (custom.length > 1) throw new PoolConflictError(nodeName, custom.map((p) => p.metadata.name).sort());
  return custom[0] ?? matching.find((p) => p.metadata.name === WORKER_POOL);
}
