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

// Kubernetes' NodeRestriction admission plugin (plugin/pkg/admission/noderestriction) and the
// kubelet's own list (k8s.io/kubelet/pkg/apis: IsKubeletLabel): the labels a kubelet may put on
// its own Node. Any of them can be set by whoever controls the host, so none may choose a pool.
const KUBELET_LABELS = new Set([
  'kubernetes.io/hostname', 'kubernetes.io/arch', 'kubernetes.io/os',
  'beta.kubernetes.io/arch', 'beta.kubernetes.io/os', 'beta.kubernetes.io/instance-type',
  'node.kubernetes.io/instance-type',
  'failure-domain.beta.kubernetes.io/zone', 'failure-domain.beta.kubernetes.io/region',
  'topology.kubernetes.io/zone', 'topology.kubernetes.io/region',
]);
const KUBELET_LABEL_NAMESPACES = ['kubelet.kubernetes.io', 'node.kubernetes.io'];
/** The prefix only a cluster's administrators may set (a kubelet is refused it). */
export const NODE_RESTRICTION_PREFIX = 'node-restriction.kubernetes.io/';

const inDomain = (namespace: string, domain: string): boolean => namespace === domain || namespace.endsWith(`.${domain}`);

/** Whether a kubelet may set this label on its own Node under NodeRestriction. */
export function kubeletMaySetLabel(key: string): boolean {
  const slash = key.indexOf('/');
  const namespace = slash >= 0 ? key.slice(0, slash).toLowerCase() : '';
  if (inDomain(namespace, 'node-restriction.kubernetes.io')) return false;
  if (KUBELET_LABELS.has(key) || KUBELET_LABEL_NAMESPACES.some((d) => inDomain(namespace, d))) return true;
  return !(inDomain(namespace, 'kubernetes.io') || inDomain(namespace, 'k8s.io'));
}

/**
 * The labels that may choose a node's pool: never one the node could have set for itself. On a
 * cluster that is every label a kubelet may not set on its own Node; without one, every label
 * but those the agent reported (the credential's pool and the operators' `mcctl label node` are
 * what remains).
 */
export function poolSelectionLabels(labels: Labels, source: { kubernetes: true } | { kubernetes: false; reported?: Labels }): Labels {
  const out: Labels = {};
  for (const [k, v] of Object.entries(labels)) {
    const selfSet = source.kubernetes ? kubeletMaySetLabel(k) : source.reported?.[k] === v;
    if (!selfSet) out[k] = v;
  }
  return out;
}

/**
 * Selector keys of a pool that no trusted source can be expected to set: what a node's own report
 * would have to say for the pool to select it. Role and node-restriction labels come from
 * credentials and administrators; anything else only from an operator's `mcctl label node`.
 */
export function selfReportableSelectorKeys(pool: MachineConfigPool): string[] {
  const keys = [
    ...Object.keys(pool.spec.nodeSelector?.matchLabels ?? {}),
    ...(pool.spec.nodeSelector?.matchExpressions ?? []).filter((r) => r.operator === 'In' || r.operator === 'Exists').map((r) => r.key),
  ];
  return [...new Set(keys)].filter((k) => kubeletMaySetLabel(k)).sort();
}

/** Apply's warnings for pools whose nodeSelector a host's own report would have to satisfy. */
export function selfReportedSelectorWarnings(pools: readonly MachineConfigPool[]): string[] {
  return pools.flatMap((pool) => selfReportableSelectorKeys(pool).map((key) => {
    const name = pool.metadata.name;
    return `MachineConfigPool/${name}: nodeSelector selects on ${key}, a label a host may report or (on a cluster) a kubelet may set for itself; `
      + `mcplane never lets a host's own labels choose its pool, so only nodes an operator labels (mcctl label node NAME ${key}=..., or kubectl label node on a cluster) `
      + `or whose credential is bound to pool ${name} (mcctl pki node NAME --pool ${name}, or a bootstrap token for pool ${name}) join it`;
  }));
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
}): { labels: Labels; ignored: Labels; fromAgent: Labels } {
  const ignored: Labels = {};
  if (input.existing) {
    for (const [k, v] of Object.entries(input.reported)) if (input.existing[k] !== v) ignored[k] = v;
    return { labels: input.existing, ignored, fromAgent: {} };
  }
  const labels: Labels = {};
  for (const [k, v] of Object.entries(input.reported)) {
    if (k.startsWith(NODE_ROLE_PREFIX) && input.bound[k] !== v) ignored[k] = v;
    else labels[k] = v;
  }
  // What the agent said and the binding did not: it describes the host, it never picks a pool.
  const fromAgent: Labels = {};
  for (const [k, v] of Object.entries(labels)) if (input.bound[k] !== v) fromAgent[k] = v;
  return { labels: { ...labels, ...input.bound }, ignored, fromAgent };
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
