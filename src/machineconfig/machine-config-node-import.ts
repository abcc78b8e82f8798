// What `mcctl import` makes of a cluster's MachineConfigNodes. MCO's daemon writes one per node:
// its update status under MCO, not configuration, so none of it is applied or stored (mcplane
// derives its own MachineConfigNode from its agents' reports). For an operator moving a cluster
// from MCO to mcplane the useful part is a comparison, node by node: whether mcplane manages the
// node yet, where MCO left it (current and desired rendered config, whether its update is done),
// whether that rendered config is known to mcplane, and whether mcplane has the node on the same
// config. Pure: the caller lists both sides.

import { API_KINDS, typeNameOf } from './api-kinds.ts';

/** A cluster MachineConfigNode as far as the comparison reads it (MCO's v1 field names). */
export interface ClusterMcnSummary {
  name: string;
  pool: string;
  current: string;
  desired: string;
  /** The Updated condition's status ('' when MCO has not written it). */
  updated: string;
}

/** mcplane's view of a node: its own MachineConfigNode. */
export interface McplaneNodeConfig {
  name: string;
  pool: string;
  current: string;
  desired: string;
}

export type McnVerdict = 'not-managed' | 'same' | 'different';

export interface McnComparison {
  node: string;
  cluster: ClusterMcnSummary;
  /** undefined: no agent of that name has enrolled with mcplane. */
  mcplane?: McplaneNodeConfig;
  /** Whether mcplane has a rendered config (or a MachineConfig) named as the cluster's current one. */
  clusterConfigKnown: boolean;
  verdict: McnVerdict;
  /** Whether MCO had left the node mid-update (current ≠ desired, or Updated not True). */
  clusterUpdating: boolean;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const obj = (v: unknown): Record<string, unknown> => (v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : {});

/** The fields the comparison reads of a cluster object; undefined for one without a name. */
export function clusterMcnSummary(object: unknown): ClusterMcnSummary | undefined {
  const o = obj(object);
  const name = str(obj(o.metadata).name) || str(obj(obj(o.spec).node).name);
  if (!name) return undefined;
  const spec = obj(o.spec);
  const status = obj(o.status);
  const conditions = Array.isArray(status.conditions) ? status.conditions.map(obj) : [];
  return {
    name,
    pool: str(obj(spec.pool).name),
    current: str(obj(status.configVersion).current),
    desired: str(obj(status.configVersion).desired) || str(obj(spec.configVersion).desired),
    updated: str(conditions.find((c) => c.type === 'Updated')?.status),
  };
}

/** Each cluster MachineConfigNode against mcplane's, in node name order. */
export function compareMachineConfigNodes(cluster: readonly unknown[], mcplane: readonly McplaneNodeConfig[], mcplaneConfigs: ReadonlySet<string>): McnComparison[] {
  const ours = new Map(mcplane.map((m) => [m.name, m]));
  return cluster.flatMap((o) => clusterMcnSummary(o) ?? [])
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((c) => {
      const m = ours.get(c.name);
      const verdict: McnVerdict = !m ? 'not-managed' : m.current !== '' && m.current === c.current ? 'same' : 'different';
      return { node: c.name, cluster: c, ...(m ? { mcplane: m } : {}), clusterConfigKnown: c.current !== '' && mcplaneConfigs.has(c.current), verdict, clusterUpdating: c.current !== c.desired || (c.updated !== '' && c.updated !== 'True') };
    });
}

/** One line of the import's report: `machineconfignode/NAME compared: ...`. */
export function formatMcnComparison(c: McnComparison): string {
  const none = (s: string): string => s || '<none>';
  const cluster = `cluster (MCO): pool ${none(c.cluster.pool)}, current ${none(c.cluster.current)}, desired ${none(c.cluster.desired)}${c.clusterUpdating ? ' (MCO had not finished its update)' : ''}`;
  const known = c.cluster.current === '' ? '' : c.clusterConfigKnown ? `; ${c.cluster.current} is in mcplane` : `; ${c.cluster.current} is not in mcplane (it renders its own)`;
  const ours = !c.mcplane
    ? 'mcplane: not managed (no agent of this name has enrolled)'
    : `mcplane: pool ${none(c.mcplane.pool)}, current ${none(c.mcplane.current)}, desired ${none(c.mcplane.desired)}; ${c.verdict === 'same' ? 'same config' : 'different config'}`;
  return `${typeNameOf('MachineConfigNode')}/${c.node} compared: ${cluster}${known}; ${ours}`;
}

/** Where a cluster serves the kind (the catalogue's entry), for the caller's list. */
export const CLUSTER_MCN_RESOURCE = { group: API_KINDS.MachineConfigNode.group, version: API_KINDS.MachineConfigNode.version, plural: API_KINDS.MachineConfigNode.plural };
