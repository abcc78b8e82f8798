// The policy a pool's nodes follow: MCO keeps one node disruption policy for the whole cluster
// (MachineConfiguration/cluster); mcplane also lets a pool carry its own. The pool's entries are
// layered on top: an entry for the same path prefix, unit or sshkey replaces the cluster's, and
// everything else of the cluster's still applies, so a custom pool that takes the worker configs
// follows the cluster policy without copying it.

import type { PolicyEntryRef } from './config-diff.ts';
import type { DisruptionPolicy } from './types.ts';

/** Undefined when neither has a policy (the agent then applies MCO's defaults: reboot). */
export function mergeDisruptionPolicies(cluster: DisruptionPolicy | undefined, pool: DisruptionPolicy | undefined): DisruptionPolicy | undefined {
  if (!cluster) return pool;
  if (!pool) return cluster;
  const out: DisruptionPolicy = {};
  const poolPaths = new Set((pool.files ?? []).map((f) => f.path));
  const files = [...(cluster.files ?? []).filter((f) => !poolPaths.has(f.path)), ...(pool.files ?? [])];
  if (files.length || cluster.files || pool.files) out.files = files;
  const poolUnits = new Set((pool.units ?? []).map((u) => u.name));
  const units = [...(cluster.units ?? []).filter((u) => !poolUnits.has(u.name)), ...(pool.units ?? [])];
  if (units.length || cluster.units || pool.units) out.units = units;
  const sshkey = pool.sshkey ?? cluster.sshkey;
  if (sshkey) out.sshkey = sshkey;
  return out;
}

/**
 * Where a merged policy's entry came from, as a user finds it in their YAML: the pool's entry
 * wins for the same key (as merged above), otherwise the cluster's.
 */
export function policyEntryOrigin(
  cluster: DisruptionPolicy | undefined,
  pool: DisruptionPolicy | undefined,
  poolName: string,
  entry: PolicyEntryRef,
): string {
  const has = (p: DisruptionPolicy | undefined): number => {
    if (!p) return -1;
    if (entry.kind === 'sshkey') return p.sshkey ? 0 : -1;
    if (entry.kind === 'files') return (p.files ?? []).findIndex((f) => f.path === entry.key);
    return (p.units ?? []).findIndex((u) => u.name === entry.key);
  };
  if (entry.builtin) return `MCO's built-in node disruption policy (${entry.kind === 'sshkey' ? 'sshkey' : `${entry.kind} ${entry.key}`}), overridable in MachineConfiguration/cluster`;
  const at = (i: number): string => (entry.kind === 'sshkey' ? 'sshkey' : `${entry.kind}[${i}]`);
  const inPool = has(pool);
  if (inPool >= 0) return `MachineConfigPool/${poolName} spec.disruptionPolicy.${at(inPool)}`;
  const inCluster = has(cluster);
  if (inCluster >= 0) return `MachineConfiguration/cluster spec.nodeDisruptionPolicy.${at(inCluster)}`;
  return 'unknown policy entry';
}
