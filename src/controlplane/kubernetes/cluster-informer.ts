// List, then watch, one cluster-scoped collection (an informer, in client-go's words): the watch
// resumes from the last resourceVersion it saw (bookmarks included: after a server-side close, a
// timeout, a lost connection), and a 410 Gone (the history it needs was compacted) lists again.
// Failures back off, so an API server that keeps refusing (403, 500) is not asked in a tight
// loop. `synced` is true once a list succeeded, so a reader never mistakes "not listed yet" for
// "none exist". The one list-and-watch loop of the control plane: Nodes and MCO's custom
// resources alike.

import { EventEmitter } from 'node:events';
import type { Logger } from '../../runtime/logger.ts';
import { isIdleTimeout, kubeFailureOf, type KubernetesAccess, type V1Node } from './kube-client.ts';

export type ClusterObject = { metadata: { name: string; uid?: string; resourceVersion?: string; generation?: number; [k: string]: unknown }; [k: string]: unknown };

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** Where an informer lists and watches. */
export interface ListWatchSource<T> {
  /** For logs: "nodes", "machineconfigs.machineconfiguration.openshift.io". */
  readonly what: string;
  /** The collection's path, for the watch: `/api/v1/nodes`, `/apis/GROUP/VERSION/PLURAL`. */
  readonly path: string;
  list(): Promise<{ items: T[]; resourceVersion: string }>;
  /** What to tell the operator when the API server says 404 or 403. */
  hint?(code: number): string;
  /**
   * A kind the cluster may not have (its CRD is not installed): a 404 means none of it. The
   * informer is synced with nothing and lists again now and then, in case the CRD comes.
   */
  readonly optional?: boolean;
}

/** How often an optional kind the cluster lacks is looked for again. */
export const ABSENT_RELIST_MS = 60_000;

export interface CustomResource {
  group: string;
  version: string;
  plural: string;
}

export function customResourceSource(kube: KubernetesAccess, resource: CustomResource, options: { optional?: boolean } = {}): ListWatchSource<ClusterObject> {
  const { group, version, plural } = resource;
  const what = `${plural}.${group}`;
  return {
    what,
    ...(options.optional ? { optional: true } : {}),
    path: `/apis/${group}/${version}/${plural}`,
    async list() {
      const list = await kube.custom.listClusterCustomObject({ group, version, plural }) as { items?: ClusterObject[]; metadata?: { resourceVersion?: string } };
      return { items: (list.items ?? []).filter((i) => i?.metadata?.name), resourceVersion: list.metadata?.resourceVersion ?? '' };
    },
    hint: (code) => code === 404 ? ` (the cluster has no ${what}: is the Machine Config Operator's CRD installed?)`
      : code === 403 ? ' (not allowed: see packaging/kubernetes/rbac.yaml)' : '',
  };
}

export function nodeSource(kube: KubernetesAccess): ListWatchSource<V1Node> {
  return {
    what: 'nodes',
    path: '/api/v1/nodes',
    async list() {
      const list = await kube.core.listNode();
      return { items: list.items, resourceVersion: list.metadata?.resourceVersion ?? '' };
    },
    hint: (code) => code === 403 ? ' (not allowed: see packaging/kubernetes/rbac.yaml)' : '',
  };
}

const BACKOFF_MS = [200, 500, 1000, 2000, 5000];
/** A watch that ends cleanly sooner than this after it opened did not really watch. */
const QUICK_END_MS = 1000;

interface InformerEvents<T> {
  /** Anything changed: a list, or an event. */
  change: [];
  /** Every object there is, at the start and after each relist. */
  listed: [T[]];
  event: [WatchEventType, T];
}

export class ClusterInformer<T extends { metadata?: { name?: string; resourceVersion?: string } } = ClusterObject> extends EventEmitter<InformerEvents<T>> {
  /** The objects by name, when kept (a reader that stores its own copy of each need not). */
  readonly objects = new Map<string, T>();
  #synced = false;
  #resourceVersion = '';
  #stopWatch: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #failures = 0;
  /** Clean watch ends in a row that came within QUICK_END_MS of the watch's start. */
  #quickEnds = 0;
  #running = false;
  /** An optional kind the cluster was found not to serve. */
  #absent = false;
  /** Bumped by every start/stop, so a late callback of an old watch does nothing. */
  #epoch = 0;

  private readonly kube: KubernetesAccess;
  readonly source: ListWatchSource<T>;
  private readonly log: Logger;
  /** false: only the events say what the objects are (Nodes are large, and stored elsewhere). */
  private readonly keepObjects: boolean;
  constructor(
    kube: KubernetesAccess,
    source: ListWatchSource<T>,
    log: Logger,
    keepObjects: boolean = true,
  ) {
    super();
    this.kube = kube;
    this.source = source;
    this.log = log;
    this.keepObjects = keepObjects;
  }

  get synced(): boolean {
    return this.#synced;
  }

  get what(): string {
    return this.source.what;
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

  /** Lists again now (a reader could not use the last list). */
  relist(): void {
    if (!this.#running) return;
    this.#stopWatch?.();
    this.#stopWatch = undefined;
    clearTimeout(this.#timer);
    const epoch = ++this.#epoch;
    void this.#list(epoch);
  }

  async #list(epoch: number): Promise<void> {
    try {
      const { items, resourceVersion } = await this.source.list();
      if (epoch !== this.#epoch) return;
      if (this.#absent) this.log.info({ resource: this.what }, 'the cluster has this kind now; following it');
      this.#absent = false;
      this.objects.clear();
      if (this.keepObjects) for (const item of items) if (item.metadata?.name) this.objects.set(item.metadata.name, item);
      this.#resourceVersion = resourceVersion;
      this.#synced = true;
      this.#failures = 0;
      this.log.debug({ resource: this.what, objects: items.length, resourceVersion }, 'listed from the cluster');
      this.emit('listed', items);
      this.emit('change');
      await this.#watch(epoch);
    } catch (err) {
      if (epoch !== this.#epoch) return;
      if (this.source.optional && kubeFailureOf(err).code === 404) {
        this.#noneInCluster(epoch);
        return;
      }
      this.#retry(epoch, 'list', err, () => void this.#list(epoch));
    }
  }

  /** An optional kind the cluster does not serve: synced, with nothing, until it does. */
  #noneInCluster(epoch: number): void {
    if (!this.#absent) this.log.info({ resource: this.what, retryInMs: ABSENT_RELIST_MS }, 'the cluster has no such kind (404); none of it, looking again later');
    this.#absent = true;
    this.#failures = 0;
    const had = this.objects.size > 0 || !this.#synced;
    this.objects.clear();
    this.#synced = true;
    if (had) {
      this.emit('listed', []);
      this.emit('change');
    }
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      if (epoch === this.#epoch) void this.#list(epoch);
    }, ABSENT_RELIST_MS);
    this.#timer.unref();
  }

  async #watch(epoch: number): Promise<void> {
    const startedAt = Date.now();
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
      if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') return;
      if (type === 'DELETED') this.objects.delete(object.metadata.name);
      else if (this.keepObjects) this.objects.set(object.metadata.name, object);
      this.#failures = 0; // the watch works again: the next resume need not wait
      this.emit('event', type, object);
      this.emit('change');
    };
    const onEnd = (err: unknown): void => {
      if (epoch !== this.#epoch) return;
      this.#stopWatch = undefined;
      if (relist || kubeFailureOf(err).code === 410) {
        this.log.info({ resource: this.what, resourceVersion: this.#resourceVersion }, 'watch expired (410 Gone); listing again');
        void this.#list(epoch);
      } else if (refused || (err && !isIdleTimeout(err) && (err as Error).name !== 'AbortError')) {
        // With backoff: a server that keeps refusing must not be asked again in a tight loop.
        this.#retry(epoch, 'watch', refused ?? err, () => void this.#watch(epoch));
      } else {
        // The server ends watches now and then (its timeout), and the client ends one that was
        // quiet for a while: resume where it stopped. Watches that keep ending at once (a proxy
        // that closes them) are resumed ever more slowly, so they are not a tight loop either.
        this.#quickEnds = Date.now() - startedAt < QUICK_END_MS ? this.#quickEnds + 1 : 0;
        const delay = this.#quickEnds === 0 ? 0 : Math.min(BACKOFF_MS.at(-1)!, 50 * 2 ** (this.#quickEnds - 1));
        clearTimeout(this.#timer);
        this.#timer = setTimeout(() => {
          if (epoch === this.#epoch) void this.#watch(epoch);
        }, delay);
        this.#timer.unref();
      }
    };
    try {
      const stop = await this.kube.watch(this.source.path, { resourceVersion: this.#resourceVersion, allowWatchBookmarks: 'true' }, onEvent, onEnd);
      // Stopped (or ended and restarted) while the watch was being opened: this one is stale.
      if (epoch !== this.#epoch) stop();
      else this.#stopWatch = stop;
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
    this.log[this.#failures === 1 ? 'warn' : 'debug']({ resource: this.what, attempt: this.#failures, retryInMs: delay, error: failure.message }, `cannot ${what} ${this.what} in the cluster${this.source.hint?.(failure.code) ?? ''}; retrying`);
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      if (epoch === this.#epoch) next();
    }, delay);
    this.#timer.unref();
  }
}
