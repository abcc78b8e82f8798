// Stores each node's finished updates in its NodeHistory, the last MAX_HISTORY_UPDATES of them.
// The writer is the replica holding the node's stream (the one that hears the agent), and each
// write is fenced by that session's epoch as NodeStatus writes are, so a replica that lost the
// node cannot write over the newer session's history. It writes only when the agent reports an
// update it has not stored yet (the agent's lastUpdate), not on every status report: an update
// is one write. A write lost to a crash comes back: the agent reports its lastUpdate again when
// it registers, and a record already stored is recognised by its id.

import { appendToHistory, ConflictError, withPhase, type UpdatePhase, type UpdateRecord } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import type { NodeHistoryRecord } from '../store/stored-records.ts';

/**
 * Phases the control plane ran for an update (the leader's drain), merged into the agent's
 * record before it is stored. The seam for the drain: it returns what the leader recorded.
 */
export type ControlPlanePhases = (node: string, record: UpdateRecord) => UpdatePhase[];

const ATTEMPTS = 3;

export class NodeHistoryWriter {
  /** The last record id stored (or being stored) per node: repeats of a report cost nothing. */
  #offered = new Map<string, string>();
  /** One chain per node: a node's records are stored in order, nodes do not wait for each other. */
  #queues = new Map<string, Promise<void>>();
  controlPlanePhases: ControlPlanePhases = () => [];

  private readonly cache: ClusterCache;
  private readonly log: Logger;
  constructor(cache: ClusterCache, log: Logger) {
    this.cache = cache;
    this.log = log;
  }

  /** A finished update the agent reported; stored once, in the background. */
  offer(node: string, epoch: string, record: UpdateRecord | null | undefined): void {
    if (!record || !record.result || this.#offered.get(node) === record.id) return;
    this.#offered.set(node, record.id);
    const queued: Promise<void> = (this.#queues.get(node) ?? Promise.resolve())
      .then(() => this.#write(node, epoch, record))
      .catch((err: unknown) => {
        if (this.#offered.get(node) === record.id) this.#offered.delete(node);
        this.log.warn({ err, node, update: record.id }, 'could not store the node\'s update in its history; the agent reports it again when it reconnects');
      })
      .finally(() => { if (this.#queues.get(node) === queued) this.#queues.delete(node); });
    this.#queues.set(node, queued);
  }

  /** Resolves once every offered record is stored or given up (shutdown, tests). */
  async idle(): Promise<void> {
    while (this.#queues.size) await Promise.all(this.#queues.values());
  }

  async #write(node: string, epoch: string, reported: UpdateRecord): Promise<void> {
    let record = reported;
    for (const phase of this.controlPlanePhases(node, reported)) record = withPhase(record, phase);
    for (let attempt = 1; ; attempt++) {
      const existing = await this.cache.store.get('NodeHistory', node);
      if (existing?.value.updates.some((u) => u.id === record.id)) return;
      const value: NodeHistoryRecord = { updates: appendToHistory(existing?.value.updates ?? [], record) };
      try {
        await this.cache.store.commit([
          { type: 'check', kind: 'AgentSession', name: node, expectedVersion: epoch },
          { type: 'put', kind: 'NodeHistory', name: node, value, expectedVersion: existing?.resourceVersion ?? null, ...(existing ? { createdAt: existing.createdAt } : {}) },
        ]);
        return;
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
        // The session moved on: the replica that holds it now stores the record when the agent
        // re-registers. Otherwise the history changed under us (a delete): read it again.
        if (this.cache.sessions.get(node)?.resourceVersion !== epoch || attempt >= ATTEMPTS) {
          this.#offered.delete(node);
          this.log.info({ node, update: record.id }, 'update not stored in the history here: the node\'s session has moved to a newer stream');
          return;
        }
      }
    }
  }
}
