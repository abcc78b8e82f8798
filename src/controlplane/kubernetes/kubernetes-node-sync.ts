// Keeps a stored copy of each Kubernetes Node (KubernetesNode records) while this replica leads:
// its labels and creation time (what the node is, once a cluster exists), its cordon, and MCO's
// annotations on it. Stored rather than held in the leader's memory so every replica's cache
// serves the same node view, and a new leader decides from what the last one saw.
// Only the fields mcplane reads are compared, so kubelet heartbeats write nothing.

import type { V1Node } from './kube-client.ts';
import { canonicalJson } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import { MCO_ANNOTATION_PREFIX, type NodeOperations } from './node-operations.ts';
import { ClusterInformer, nodeSource } from './cluster-informer.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import type { WriteOp } from '../store/store.ts';
import type { KubernetesNodeRecord } from '../store/stored-records.ts';

const RELIST_AFTER_FAILURE_MS = 2000;

export class KubernetesNodeSync {
  /** Lists and watches while this replica leads; each list and event is stored. */
  readonly #informer: ClusterInformer<V1Node>;
  #leading = false;
  #synced = false;
  /** Writes go one after another, in the order the watch delivered them. */
  #queue: Promise<unknown> = Promise.resolve();
  #restart: NodeJS.Timeout | undefined;

  private readonly cache: ClusterCache;
  private readonly writer: LeaderWriter;
  private readonly ops: NodeOperations;
  private readonly log: Logger;
  /** Called after each full list is stored (the rollout waits for the first). */
  private readonly onSynced: () => void;
  constructor(
    cache: ClusterCache,
    writer: LeaderWriter,
    ops: NodeOperations,
    log: Logger,
    onSynced: () => void,
  ) {
    this.cache = cache;
    this.writer = writer;
    this.ops = ops;
    this.log = log;
    this.onSynced = onSynced;
    this.#informer = new ClusterInformer(ops.access, nodeSource(ops.access), log, false);
    this.#informer.on('listed', (nodes) => void this.#enqueue(() => this.#storeList(nodes)).then((stored) => {
      // Until a full list is stored the rollout holds back drainable updates: list again.
      if (!stored && this.#leading) this.#restartSoon();
    }));
    this.#informer.on('event', (type, node) => void this.#enqueue(() => (type === 'DELETED' ? this.#storeDelete(node) : this.#storeNodes([node]))));
  }

  /** True once this leadership stored a full list: until then, "no Node" means "not known yet". */
  get synced(): boolean {
    return this.#synced;
  }

  setLeading(leading: boolean): void {
    if (leading === this.#leading) return;
    this.#leading = leading;
    if (leading) {
      this.#informer.start();
    } else {
      this.#informer.stop();
      this.#synced = false;
    }
  }

  async stop(): Promise<void> {
    clearTimeout(this.#restart);
    this.setLeading(false);
    await this.#queue;
  }

  #restartSoon(): void {
    clearTimeout(this.#restart);
    this.#restart = setTimeout(() => this.#informer.relist(), RELIST_AFTER_FAILURE_MS);
  }

  /**
   * Stores a Node as an API call returned it (the leader's own cordon), in order with the watch's
   * events, so the leader's next decision does not read the Node from before its own change.
   */
  async observe(node: V1Node): Promise<void> {
    await this.#enqueue(() => this.#storeNodes([node]));
  }

  /** Runs `work` after the writes before it; resolves true when it succeeded. */
  #enqueue(work: () => Promise<void>): Promise<boolean> {
    const done = this.#queue.then(work).then(() => true, (err: unknown) => {
      // The next event or relist writes the node again; a deposed leader's writes fail here.
      this.log.warn({ err }, 'storing Kubernetes Nodes failed');
      return false;
    });
    this.#queue = done;
    return done;
  }

  async #storeList(nodes: V1Node[]): Promise<void> {
    const names = new Set(nodes.map((n) => n.metadata?.name ?? ''));
    const gone: WriteOp[] = [];
    for (const [name, stored] of this.cache.kubernetesNodes) {
      if (!names.has(name)) gone.push({ type: 'delete', kind: 'KubernetesNode', name, expectedVersion: stored.resourceVersion });
    }
    await this.writer.commitEach(gone);
    await this.#storeNodes(nodes);
    if (!this.#leading) return;
    const first = !this.#synced;
    this.#synced = true;
    if (first) this.log.info({ nodes: nodes.length }, 'Kubernetes Nodes listed');
    this.onSynced();
  }

  async #storeNodes(nodes: V1Node[]): Promise<void> {
    const ops: WriteOp[] = [];
    for (const node of nodes) {
      const name = node.metadata?.name;
      if (!name) continue;
      const value = recordOf(node);
      const existing = this.cache.kubernetesNodes.get(name);
      if (existing && canonicalJson(existing.value) === canonicalJson(value)) continue;
      ops.push({ type: 'put', kind: 'KubernetesNode', name, value, expectedVersion: existing?.resourceVersion ?? null, ...(existing ? { createdAt: existing.createdAt } : {}) });
    }
    await this.writer.commitEach(ops);
  }

  async #storeDelete(node: V1Node): Promise<void> {
    const name = node.metadata?.name ?? '';
    const existing = this.cache.kubernetesNodes.get(name);
    if (existing) await this.writer.commit([{ type: 'delete', kind: 'KubernetesNode', name, expectedVersion: existing.resourceVersion }]);
  }
}

export function recordOf(node: V1Node): KubernetesNodeRecord {
  const annotations: Record<string, string> = {};
  for (const [k, v] of Object.entries(node.metadata?.annotations ?? {})) if (k.startsWith(MCO_ANNOTATION_PREFIX)) annotations[k] = v;
  const created = node.metadata?.creationTimestamp;
  return {
    labels: { ...node.metadata?.labels },
    createdAt: created ? new Date(created).getTime() : 0,
    unschedulable: node.spec?.unschedulable === true,
    annotations,
    uid: node.metadata?.uid ?? '',
  };
}
