// The MachineConfigNode of each node (MCO's per-node update status), from what this replica
// knows: the agent's own status (not the displayed one: the builder takes the drain from the
// leader's record itself), the drain record, the rendered configs and the node's update history,
// which is not cached (it is read only here and by GetNodeHistory), so it comes from the store,
// one get per node.

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

/** Histories read at once: a list of a large fleet is one store read per node. */
const PARALLEL_READS = 32;

/**
 * Every node's MachineConfigNode (of one pool, or all), in name order. Each history is a single
 * get, never a list of the kind: on the status thread's relayed store a list restarts the relay's
 * watch and holds only the cached kinds.
 */
export async function machineConfigNodes(cache: ClusterCache, store: Store, pool: string): Promise<MachineConfigNode[]> {
  const names = cache.sortedNodeNames().filter((n) => !pool || cache.nodes.get(n)?.pool === pool);
  const histories = new Map<string, UpdateRecord[] | undefined>();
  for (let i = 0; i < names.length; i += PARALLEL_READS) {
    await Promise.all(names.slice(i, i + PARALLEL_READS).map(async (n) => histories.set(n, (await store.get('NodeHistory', n))?.value.updates)));
  }
  return names.flatMap((n) => machineConfigNodeOf(cache, n, histories.get(n)) ?? []);
}

/** One node's MachineConfigNode with its history, or undefined for an unknown node. */
export async function machineConfigNode(cache: ClusterCache, store: Store, name: string): Promise<MachineConfigNode | undefined> {
  if (!cache.nodes.has(name)) return undefined;
  const history = await store.get('NodeHistory', name);
  return machineConfigNodeOf(cache, name, history?.value.updates);
}
