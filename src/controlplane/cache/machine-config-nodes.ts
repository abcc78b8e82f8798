// The MachineConfigNode of each node (MCO's per-node update status), from what this replica
// knows: the agent's own status (not the displayed one: the builder takes the drain from the
// leader's record itself), the drain record, the rendered configs and the node's update history,
// which is not cached (it is read only here and by GetNodeHistory), so it comes from the store.

import { buildMachineConfigNode, type MachineConfigNode } from '../../machineconfig/machine-config-node.ts';
import type { UpdateRecord } from '../../machineconfig/index.ts';
import type { Store } from '../store/store.ts';
import { EMPTY_NODE_STATUS, type ClusterCache } from './cluster-cache.ts';

/** The node's MachineConfigNode, or undefined for a node this replica does not know. */
export function machineConfigNodeOf(cache: ClusterCache, name: string, history: readonly UpdateRecord[] | undefined): MachineConfigNode | undefined {
  const view = cache.nodes.get(name);
  if (!view) return undefined;
  const status = cache.nodeStatuses.get(name)?.value.status ?? EMPTY_NODE_STATUS;
  const drain = cache.drains.get(name)?.value;
  const spec = (config: string) => (config ? cache.rendered.get(config)?.value.spec : undefined);
  return buildMachineConfigNode({
    name,
    pool: view.pool,
    registeredAt: view.registeredAt,
    desiredConfig: view.desiredConfig,
    status,
    drain,
    history: history ?? [],
    currentSpec: spec(status.currentConfig),
    desiredSpec: spec(view.desiredConfig),
  });
}

/** Every node's MachineConfigNode (of one pool, or all), in name order; histories read in one list. */
export async function machineConfigNodes(cache: ClusterCache, store: Store, pool: string): Promise<MachineConfigNode[]> {
  const names = cache.sortedNodeNames().filter((n) => !pool || cache.nodes.get(n)?.pool === pool);
  if (names.length === 0) return [];
  const histories = new Map<string, UpdateRecord[]>();
  for (const item of (await store.list(['NodeHistory'])).items) histories.set(item.name, (item.value as { updates: UpdateRecord[] }).updates);
  return names.flatMap((n) => machineConfigNodeOf(cache, n, histories.get(n)) ?? []);
}

/** One node's MachineConfigNode with its history, or undefined for an unknown node. */
export async function machineConfigNode(cache: ClusterCache, store: Store, name: string): Promise<MachineConfigNode | undefined> {
  if (!cache.nodes.has(name)) return undefined;
  const history = await store.get('NodeHistory', name);
  return machineConfigNodeOf(cache, name, history?.value.updates);
}
