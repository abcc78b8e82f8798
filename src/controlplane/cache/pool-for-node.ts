// Which pool a node belongs to, by MCO's rule, over the pools in the cache: the leader's
// membership controller decides with it, and a replica answering a registration tells the agent
// the same rule's answer.

import { poolMembership, type Labels } from '../../machineconfig/index.ts';
import type { ClusterCache } from './cluster-cache.ts';

/** The pool a node with these labels belongs to, and why none when it has none. */
export function poolFor(cache: ClusterCache, name: string, labels: Labels): { pool: string; poolError?: string } {
  return poolMembership(name, labels, [...cache.pools.values()].map((o) => o.value));
}
