// Lists the cluster's Nodes once, then follows them with a watch that resumes from the last
// resourceVersion it saw (bookmarks included) whenever the connection ends, and lists again
// when the API server answers 410 Gone (the version was compacted away: events were lost).

import type { Logger } from '../../runtime/logger.ts';
import { isIdleTimeout, kubeFailureOf, type V1Node } from './kube-client.ts';
import { failureMessage, type NodeOperations } from './node-operations.ts';

export interface NodeWatchHandlers {
  /** Every Node there is, at the start and after each relist. */
  onList(nodes: V1Node[]): void;
  onEvent(type: 'ADDED' | 'MODIFIED' | 'DELETED', node: V1Node): void;
}

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;

/** Starts the list and watch; the returned function stops it. */
export function watchNodes(ops: NodeOperations, handlers: NodeWatchHandlers, log: Logger): () => void {
  let stopped = false;
  let abort: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  let resourceVersion = '';
  let failures = 0;

  const later = (fn: () => void): void => {
    if (stopped) return;
    const delay = failures === 0 ? 50 : Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** (failures - 1));
    timer = setTimeout(fn, delay);
  };

  const list = async (): Promise<void> => {
    try {
      const { nodes, resourceVersion: rv } = await ops.listNodes();
      if (stopped) return;
      resourceVersion = rv;
      failures = 0;
      handlers.onList(nodes);
      watch();
    } catch (err) {
      failures++;
      log.warn({ err: failureMessage(err), attempt: failures }, 'listing Kubernetes Nodes failed; retrying');
      later(() => void list());
    }
  };

  const watch = (): void => {
    if (stopped) return;
    let gone = false;
    void ops.access.watch('/api/v1/nodes', { resourceVersion, allowWatchBookmarks: 'true' }, (type: string, object: V1Node & { code?: number }) => {
      if (type === 'ERROR') {
        // A watch event of type ERROR carries a Status; 410 means resourceVersion is too old.
        if (object.code === 410) gone = true;
        return;
      }
      const rv = object.metadata?.resourceVersion;
      if (rv) resourceVersion = rv;
      failures = 0; // the watch works again: the next resume need not wait
      if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') handlers.onEvent(type, object);
    }, (end: unknown) => {
      if (stopped) return;
      const err = end as (Error & { statusCode?: number }) | null;
      if (gone || err?.statusCode === 410 || (err && kubeFailureOf(err).code === 410)) {
        log.info({ resourceVersion }, 'Kubernetes Node watch expired (410 Gone); listing again');
        failures = 0;
        void list();
        return;
      }
      // A timeout or a closed connection ends a watch normally: resume where it stopped.
      if (err && !isIdleTimeout(err) && err.name !== 'AbortError') {
        failures++;
        log.warn({ err: err.message, resourceVersion, attempt: failures }, 'Kubernetes Node watch failed; resuming');
      }
      later(watch);
    }).then((stop) => {
      abort = stop;
      if (stopped) stop();
    }, (err: unknown) => {
      failures++;
      log.warn({ err: (err as Error).message }, 'Kubernetes Node watch could not start; retrying');
      later(watch);
    });
  };

  void list();
  return () => {
    stopped = true;
    clearTimeout(timer);
    abort?.();
  };
}
