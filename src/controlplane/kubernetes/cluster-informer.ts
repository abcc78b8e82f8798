// List, then watch, one cluster-scoped custom resource (an informer, in client-go's words): the
// watch resumes from the last resourceVersion it saw (after a server-side close, a timeout, a
// lost connection), and a 410 Gone (the history it needs was compacted) relists. `synced` is
// true once a list succeeded, so a reader never mistakes "not listed yet" for "none exist".

import { EventEmitter } from 'node:events';
import type { Logger } from '../../runtime/logger.ts';
import { isIdleTimeout, kubeFailureOf, type KubernetesAccess } from './kube-client.ts';

export interface CustomResource {
  group: string;
  version: string;
  plural: string;
}

export type ClusterObject = { metadata: { name: string; uid?: string; resourceVersion?: string; generation?: number; [k: string]: unknown }; [k: string]: unknown };

const BACKOFF_MS = [200, 500, 1000, 2000, 5000];

export class ClusterInformer extends EventEmitter<{ change: [] }> {
  readonly objects = new Map<string, ClusterObject>();
  #synced = false;
  #resourceVersion = '';
  #stopWatch: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #failures = 0;
  #running = false;
  /** Bumped by every start/stop, so a late callback of an old watch does nothing. */
  #epoch = 0;

  constructor(private readonly kube: KubernetesAccess, readonly resource: CustomResource, private readonly log: Logger) {
    super();
  }

  get synced(): boolean {
    return this.#synced;
  }

  get what(): string {
    return `${this.resource.plural}.${this.resource.group}`;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    const epoch = ++this.#epoch;
    void this.#list(epoch);
  }

  stop(): void {
    this.#running = false;
    this.#epoch++;
    clearTimeout(this.#timer);
    this.#stopWatch?.();
    this.#stopWatch = undefined;
    this.#synced = false;
    this.objects.clear();
  }

  async #list(epoch: number): Promise<void> {
    const { group, version, plural } = this.resource;
    try {
      const list = await this.kube.custom.listClusterCustomObject({ group, version, plural }) as { items?: ClusterObject[]; metadata?: { resourceVersion?: string } };
      if (epoch !== this.#epoch) return;
      this.objects.clear();
      for (const item of list.items ?? []) if (item?.metadata?.name) this.objects.set(item.metadata.name, item);
      this.#resourceVersion = list.metadata?.resourceVersion ?? '';
      this.#synced = true;
      this.#failures = 0;
      this.log.debug({ resource: this.what, objects: this.objects.size, resourceVersion: this.#resourceVersion }, 'listed from the cluster');
      this.emit('change');
      await this.#watch(epoch);
    } catch (err) {
      if (epoch !== this.#epoch) return;
      this.#retry(epoch, 'list', err, () => void this.#list(epoch));
    }
  }

  async #watch(epoch: number): Promise<void> {
    const { group, version, plural } = this.resource;
    let relist = false;
    let refused: unknown;
    const onEvent = (type: string, object: any): void => {
      if (epoch !== this.#epoch) return;
      if (type === 'ERROR') {
        // 410 Expired: the resourceVersion is older than the server's history.
        if (object?.code === 410) relist = true;
        else refused = new Error(`the watch ended with an error: ${object?.message ?? JSON.stringify(object)}`);
        return;
      }
      const rv = object?.metadata?.resourceVersion;
      if (rv) this.#resourceVersion = rv;
      if (type === 'BOOKMARK' || !object?.metadata?.name) return;
      if (type === 'DELETED') this.objects.delete(object.metadata.name);
      else this.objects.set(object.metadata.name, object);
      this.#failures = 0;
      this.emit('change');
    };
    const onEnd = (err: unknown): void => {
      if (epoch !== this.#epoch) return;
      this.#stopWatch = undefined;
      if (relist) {
        this.log.info({ resource: this.what, resourceVersion: this.#resourceVersion }, 'watch history compacted (410 Gone); listing again');
        void this.#list(epoch);
      } else if (refused || (err && !isIdleTimeout(err))) {
        // With backoff: a server that keeps refusing must not be asked again in a tight loop.
        this.#retry(epoch, 'watch', refused ?? err, () => void this.#watch(epoch));
      } else {
        // The server ends watches now and then (its timeout), and the client ends one that was
        // quiet for a while: resume where it stopped.
        void this.#watch(epoch);
      }
    };
    try {
      this.#stopWatch = await this.kube.watch(`/apis/${group}/${version}/${plural}`, { resourceVersion: this.#resourceVersion, allowWatchBookmarks: 'true' }, onEvent, onEnd);
    } catch (err) {
      if (epoch === this.#epoch) this.#retry(epoch, 'watch', err, () => void this.#watch(epoch));
    }
  }

  #retry(epoch: number, what: string, err: unknown, again: () => void): void {
    const delay = BACKOFF_MS[Math.min(this.#failures, BACKOFF_MS.length - 1)]!;
    this.#failures++;
    const failure = kubeFailureOf(err);
    // A watch cut by a 410 at the HTTP level (some servers) also means: list again.
    const next = failure.code === 410 ? () => void this.#list(epoch) : again;
    const hint = failure.code === 404 ? ` (the cluster has no ${this.what}: is the Machine Config Operator's CRD installed?)`
      : failure.code === 403 ? ' (not allowed: see packaging/kubernetes/rbac.yaml)' : '';
    this.log[this.#failures === 1 ? 'warn' : 'debug']({ resource: this.what, attempt: this.#failures, retryInMs: delay, error: failure.message }, `cannot ${what} ${this.what} in the cluster${hint}; retrying`);
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      if (epoch === this.#epoch) next();
    }, delay);
    this.#timer.unref();
  }
}
