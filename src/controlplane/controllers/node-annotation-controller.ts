// Writes MCO's node annotations on each Kubernetes Node (currentConfig, desiredConfig, state,
// reason) so that `oc get node -o yaml` habits, dashboards and alerts built on them keep working.
// The leader writes only what differs from what the Node carries (as last seen through the
// watch), in one merge patch per node, and every node that changed within one pass goes out in
// that pass: a burst of status reports becomes one patch per node, not one per report.

import { canonicalJson } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CacheChange, ClusterCache, NodeView } from '../cache/cluster-cache.ts';
import type { Controller, ReconcileResult } from './controller.ts';
import { failureMessage, MCO_ANNOTATION_PREFIX, type NodeOperations } from '../kubernetes/node-operations.ts';
import type { KubernetesNodeSync } from '../kubernetes/kubernetes-node-sync.ts';

export const CURRENT_CONFIG_ANNOTATION = `${MCO_ANNOTATION_PREFIX}currentConfig`;
export const DESIRED_CONFIG_ANNOTATION = `${MCO_ANNOTATION_PREFIX}desiredConfig`;
export const STATE_ANNOTATION = `${MCO_ANNOTATION_PREFIX}state`;
export const REASON_ANNOTATION = `${MCO_ANNOTATION_PREFIX}reason`;

/** A reason longer than this is cut: annotations share 256 KiB per object with everyone else's. */
const REASON_LIMIT = 2048;
const PARALLEL_PATCHES = 8;
const RETRY_AFTER_FAILURE_MS = 5000;

export function mcoAnnotations(node: NodeView): Record<string, string> {
  const reason = node.status.reason;
  return {
    [CURRENT_CONFIG_ANNOTATION]: node.status.currentConfig,
    [DESIRED_CONFIG_ANNOTATION]: node.desiredConfig,
    [STATE_ANNOTATION]: node.status.state,
    [REASON_ANNOTATION]: reason.length > REASON_LIMIT ? `${reason.slice(0, REASON_LIMIT - 1)}…` : reason,
  };
}

export class NodeAnnotationController implements Controller {
  readonly name = 'node-annotations';
  readonly leaderOnly = true;
  /** What was last patched on a node, until the Node is seen again (the watch catches up). */
  #sent = new Map<string, string>();

  private readonly cache: ClusterCache;
  private readonly ops: NodeOperations;
  private readonly sync: KubernetesNodeSync;
  private readonly log: Logger;
  constructor(
    cache: ClusterCache,
    ops: NodeOperations,
    sync: KubernetesNodeSync,
    log: Logger,
  ) {
    this.cache = cache;
    this.ops = ops;
    this.sync = sync;
    this.log = log;
  }

  interestedIn(change: CacheChange): boolean {
    for (const name of change.changed.get('KubernetesNode') ?? []) this.#sent.delete(name);
    return change.nodes.size > 0;
  }

  async reconcile(signal?: AbortSignal): Promise<ReconcileResult> {
    const patches: { node: string; annotations: Record<string, string>; key: string }[] = [];
    for (const [name, kube] of this.cache.kubernetesNodes) {
      const view = this.cache.nodes.get(name);
      if (!view) continue; // a Node mcplane does not manage
      const want = mcoAnnotations(view);
      const diff: Record<string, string> = {};
      for (const [k, v] of Object.entries(want)) if (kube.value.annotations[k] !== v) diff[k] = v;
      if (Object.keys(diff).length === 0) continue;
      const key = canonicalJson(want);
      if (this.#sent.get(name) === key) continue;
      patches.push({ node: name, annotations: diff, key });
    }
    let failed = false;
    for (let i = 0; i < patches.length; i += PARALLEL_PATCHES) {
      // A deposed leader sends no further patch (the new leader writes what is still missing).
      signal?.throwIfAborted();
      await Promise.all(patches.slice(i, i + PARALLEL_PATCHES).map(async (p) => {
        try {
          const node = await this.ops.patchAnnotations(p.node, p.annotations, signal);
          this.#sent.set(p.node, p.key);
          await this.sync.observe(node);
        } catch (err) {
          if (signal?.aborted) return;
          failed = true;
          this.log.warn({ node: p.node, err: failureMessage(err) }, 'writing MCO node annotations failed; retrying');
        }
      }));
    }
    if (patches.length) this.log.debug({ nodes: patches.length }, 'MCO node annotations written');
    return failed ? { requeueAfterMs: RETRY_AFTER_FAILURE_MS } : {};
  }
}
