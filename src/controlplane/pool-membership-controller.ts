// Keeps every node's primary pool current as pools and labels change.

import { PoolConflictError, primaryPoolForNode } from '../machineconfig/index.ts';
import type { ClusterState } from './cluster-state.ts';
import type { Logger } from '../runtime/logger.ts';

export class PoolMembershipController {
  constructor(private readonly state: ClusterState, private readonly log: Logger) {}

  /** The pool a node with these labels belongs to, and why none when it has none. */
  poolFor(name: string, labels: Record<string, string>): { pool: string; poolError?: string } {
    const pools = [...this.state.pools.values()].map((o) => o.value.pool);
    try {
      const pool = primaryPoolForNode(name, labels, pools);
      return pool ? { pool: pool.metadata.name } : { pool: '', poolError: 'no MachineConfigPool nodeSelector matches the node\'s labels' };
    } catch (err) {
      if (err instanceof PoolConflictError) return { pool: '', poolError: err.message };
      throw err;
    }
  }

  async reconcile(): Promise<void> {
    const changes: { name: string; update: (n: { pool: string; poolError?: string }) => void }[] = [];
    for (const node of this.state.nodes.values()) {
      const next = this.poolFor(node.name, node.labels);
      if (next.pool !== node.pool || next.poolError !== node.poolError) {
        this.log.info({ node: node.name, from: node.pool || undefined, to: next.pool || undefined, reason: next.poolError }, 'node pool changed');
        changes.push({
          name: node.name,
          update: (n) => {
            n.pool = next.pool;
            if (next.poolError) n.poolError = next.poolError;
            else delete n.poolError;
          },
        });
      }
    }
    if (changes.length) await this.state.putNodes(changes);
  }
}
