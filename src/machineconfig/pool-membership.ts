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

/** The node's pool, or "" and why none: no selector matches, or two custom pools do. */
export function poolMembership(nodeName: string, labels: Labels | undefined, pools: readonly MachineConfigPool[]): { pool: string; poolError?: string } {
  try {
    const pool = primaryPoolForNode(nodeName, labels, pools);
    return pool ? { pool: pool.metadata.name } : { pool: '', poolError: 'no MachineConfigPool nodeSelector matches the node\'s labels' };
  } catch (err) {
    if (err instanceof PoolConflictError) return { pool: '', poolError: err.message };
    throw err;
  }
}

/** The label key prefix of node roles; role labels are the control plane's, never an agent's. */
export const NODE_ROLE_PREFIX = 'node-role.kubernetes.io/';

/** Labels that make a node match the pool's nodeSelector (what a node bound to it carries). */
export function labelsForPool(pool: MachineConfigPool | undefined, poolName: string): Labels {
  if (!pool) return { [`${NODE_ROLE_PREFIX}${poolName}`]: '' };
  const labels: Labels = { ...(pool.spec.nodeSelector?.matchLabels ?? {}) };
  for (const req of pool.spec.nodeSelector?.matchExpressions ?? []) {
    if (req.operator === 'Exists') labels[req.key] = '';
    if (req.operator === 'In' && req.values?.[0] !== undefined) labels[req.key] = req.values[0];
  }
  return labels;
}

/**
 * The labels a node registers with, under NodeRestriction's rule: an agent may not choose its
 * role. A new node takes the agent's labels without any role label, plus its bound pool's; an
 * existing node keeps the labels it has (operators change them with `mcctl label node`).
 * `ignored` lists what the agent asked for and did not get.
 */
export function admitNodeLabels(input: {
  reported: Labels;
  /** The node's labels as stored, when the node exists and has registered before. */
  existing?: Labels;
  /** Labels the binding requires (labelsForPool of the credential's pool). */
  bound: Labels;
}): { labels: Labels; ignored: Labels } {
  const ignored: Labels = {};
  if (input.existing) {
    for (const [k, v] of Object.entries(input.reported)) if (input.existing[k] !== v) ignored[k] = v;
    return { labels: input.existing, ignored };
  }
  const labels: Labels = {};
  for (const [k, v] of Object.entries(input.reported)) {
    if (k.startsWith(NODE_ROLE_PREFIX) && input.bound[k] !== v) ignored[k] = v;
    else labels[k] = v;
  }
  return { labels: { ...labels, ...input.bound }, ignored };
}

const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_PREFIX = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/** Kubernetes' label syntax: why `key=value` is not a valid label, or undefined when it is. */
export function labelProblem(key: string, value: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && !LABEL_PREFIX.test(prefix)) return `label key ${JSON.stringify(key)}: the prefix must be a DNS subdomain`;
  if (!LABEL_NAME.test(name)) return `label key ${JSON.stringify(key)}: the name must be 1-63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit`;
  if (!LABEL_VALUE.test(value)) return `label ${JSON.stringify(key)}: value ${JSON.stringify(value)} must be empty or 1-63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit`;
  return undefined;
}
