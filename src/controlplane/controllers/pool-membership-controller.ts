// Keeps every node's primary pool current as pools and labels change, and gives a new node its
// assignment record. A host bootstrapped from the Ignition endpoint already runs its pool's
// config, so that config becomes its desired one and it is not updated again.

import type { Logger } from '../../runtime/logger.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import { agentPolicyFor, disruptionPolicyJsonFor } from '../cache/node-update-plan.ts';
import { poolFor } from '../cache/pool-for-node.ts';
import type { Controller } from './controller.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import type { WriteOp } from '../store/store.ts';
import type { NodeAssignmentRecord } from '../store/stored-records.ts';

/** Node kinds whose change can move a node to another pool (its labels) or need its record. */
const MEMBERSHIP_KINDS = ['Node', 'NodeAssignment', 'KubernetesNode'] as const;

export class PoolMembershipController implements Controller {
  readonly name = 'membership';
  readonly leaderOnly = true;
  /**
   * The nodes to look at on the next pass; `all` after a pool changed or a resync. A pass over
   * every node for each change cost a 5,000-agent fan-out ~0.4 s of CPU: the rollout's
   * NodeAssignment writes (desired configs, which membership keeps as they are) each set one off.
   */
  #dirty = new Set<string>();
  #all = true;

  private readonly cache: ClusterCache;
  private readonly writer: LeaderWriter;
  private readonly log: Logger;
  constructor(cache: ClusterCache, writer: LeaderWriter, log: Logger) {
    this.cache = cache;
    this.writer = writer;
    this.log = log;
  }

  interestedIn(change: CacheChange): boolean {
    if (change.resync || change.changed.has('MachineConfigPool')) this.#all = true;
    for (const kind of MEMBERSHIP_KINDS) for (const name of change.changed.get(kind) ?? []) this.#dirty.add(name);
    return this.#all || this.#dirty.size > 0;
  }

  async reconcile(signal?: AbortSignal): Promise<void> {
    const names = this.#all ? [...this.cache.nodeRecords.keys()] : [...this.#dirty].filter((n) => this.cache.nodeRecords.has(n));
    const taken = { all: this.#all, dirty: this.#dirty };
    this.#all = false;
    this.#dirty = new Set();
    try {
      await this.#pass(names, signal);
    } catch (err) {
      // Looked at again on the retry, with whatever changed meanwhile.
      this.#all ||= taken.all;
      for (const name of taken.dirty) this.#dirty.add(name);
      throw err;
    }
  }

  async #pass(names: string[], signal?: AbortSignal): Promise<void> {
    const ops: WriteOp[] = [];
    for (const name of names) {
      // Only labels the host could not have set for itself choose its pool (NodeRestriction).
      const view = this.cache.nodes.get(name);
      if (!view) continue;
      const next = poolFor(this.cache, name, view.poolLabels);
      const existing = this.cache.assignments.get(name);
      if (existing && existing.value.pool === next.pool && existing.value.poolError === next.poolError) continue;
      // A pool change keeps what the rollout decided (the drain hold and its note included).
      const value: NodeAssignmentRecord = existing ? { ...existing.value, pool: next.pool } : this.#firstAssignment(name, next.pool);
      delete value.poolError;
      if (next.poolError) value.poolError = next.poolError;
      if (existing) this.log.info({ node: name, from: existing.value.pool || undefined, to: next.pool || undefined, reason: next.poolError }, 'node pool changed');
      ops.push({
        type: 'put', kind: 'NodeAssignment', name, value,
        expectedVersion: existing?.resourceVersion ?? null, ...(existing ? { createdAt: existing.createdAt } : {}),
      });
    }
    await this.writer.commitEach(ops, signal);
  }

  /**
   * A node seen for the first time keeps the config it says it runs, when it is still stored (a
   * store restored from a backup older than the node): with the policies of that config's pool,
   * as the rollout would have handed it.
   */
  #firstAssignment(name: string, pool: string): NodeAssignmentRecord {
    const current = this.cache.nodeStatuses.get(name)?.value.status.currentConfig ?? '';
    const configPool = current ? this.cache.rendered.get(current)?.value.pool : undefined;
    if (configPool === undefined) return { pool, desiredConfig: '' };
    return { pool, desiredConfig: current, disruptionPolicyJson: disruptionPolicyJsonFor(this.cache, configPool), ...agentPolicyFor(this.cache, configPool, current) };
  }
}
