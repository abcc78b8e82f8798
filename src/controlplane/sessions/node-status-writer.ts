// The one writer of NodeStatus records: a session's first report (part of the registration's
// commit), every report after it, and the last one when the session ends.
//
// Agents report often, so their reports are written in batches: every few milliseconds, all the
// reports that arrived, each fenced by its session's epoch, within the store's limits per
// commit. A batch that fails on one stale session is retried node by node, so one node that
// moved to another replica does not cost the others their reports. A report lost to a crash is
// re-sent in full when the agent registers again.

import { ConflictError, type NodeStatus } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import type { WriteOp } from '../store/store.ts';
import type { NodeStatusRecord } from '../store/stored-records.ts';

const FLUSH_INTERVAL_MS = 50;
/** Two ops per node (the epoch check and the write): 60 nodes stay within 128 per commit. */
const NODES_PER_COMMIT = 60;

interface Pending {
  epoch: string;
  status: NodeStatus;
  at: number;
}

export class NodeStatusWriter {
  #pending = new Map<string, Pending>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();

  private readonly cache: ClusterCache;
  private readonly log: Logger;
  private readonly onStale: (node: string, epoch: string) => void;
  constructor(
    cache: ClusterCache,
    log: Logger,
    onStale: (node: string, epoch: string) => void,
  ) {
    this.cache = cache;
    this.log = log;
    this.onStale = onStale;
  }

  /** The write of a session's first report, for the commit that opens the session. */
  opening(node: string, status: NodeStatus, at: number): WriteOp {
    return this.#put(node, status, at);
  }

  /**
   * Ends a session this replica opened: its record removed and its last report stored, "last
   * seen" the moment it ended (a connected node's heartbeats are not written: the open session
   * is what says it is there). The last report is the session's own: a batch flushed just before
   * may not be in the cache yet, and the cached one would write an older report back over it.
   * A session replaced meanwhile (another stream of the node) is left to its holder.
   */
  async ending(node: string, epoch: string, lastStatus: NodeStatus): Promise<void> {
    await this.flush();
    await this.cache.store.commit([
      { type: 'delete', kind: 'AgentSession', name: node, expectedVersion: epoch },
      this.#put(node, lastStatus, Date.now()),
    ]).catch((err: unknown) => {
      if (!(err instanceof ConflictError)) this.log.warn({ err, node }, 'could not remove the session record; it ends with this replica\'s lease');
    });
  }

  #put(node: string, status: NodeStatus, lastSeen: number): WriteOp {
    const existing = this.cache.nodeStatuses.get(node);
    const value: NodeStatusRecord = { status, lastSeen };
    // Serialized once here: the commit's size check and the backend's write both read `json`
    // (store.ts putJson), where each serialized the record again: two JSON.stringify per report.
    return { type: 'put', kind: 'NodeStatus', name: node, value, json: JSON.stringify(value), ...(existing ? { createdAt: existing.createdAt } : {}) };
  }

  enqueue(node: string, epoch: string, status: NodeStatus): void {
    this.#pending.set(node, { epoch, status, at: Date.now() });
    this.#timer ??= setTimeout(() => void this.flush(), FLUSH_INTERVAL_MS);
  }

  /** Writes everything enqueued so far; resolves when it is stored. */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = [...this.#pending];
    this.#pending.clear();
    if (batch.length === 0) return this.#flushing;
    this.#flushing = this.#flushing.then(async () => {
      for (let i = 0; i < batch.length; i += NODES_PER_COMMIT) await this.#write(batch.slice(i, i + NODES_PER_COMMIT), true);
    }).catch((err: unknown) => this.log.error({ err }, 'writing node status failed; agents re-send it when they reconnect'));
    return this.#flushing;
  }

  async #write(entries: [string, Pending][], retryAlone: boolean): Promise<void> {
    const ops: WriteOp[] = [];
    for (const [node, p] of entries) {
      ops.push({ type: 'check', kind: 'AgentSession', name: node, expectedVersion: p.epoch });
      ops.push(this.#put(node, p.status, p.at));
    }
    try {
      await this.cache.store.commit(ops);
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      if (!retryAlone || entries.length === 1) {
        const [node, p] = entries[0]!;
        this.log.info({ node }, 'status report dropped: the node\'s session has moved to a newer stream');
        this.onStale(node, p.epoch);
        return;
      }
      for (const entry of entries) await this.#write([entry], false);
    }
  }
}
