// With a cluster: keeps one MachineConfigNode object per managed node in it, as MCO does (OpenShift
// tooling, `oc get mcn` and the console read them there), when the cluster has MCO's
// MachineConfigNode CRD (machineconfiguration.openshift.io/v1, OpenShift 4.19 and later). The
// objects are what mcctl get mcn serves (machine-config-nodes.ts), written only where they
// differ: a spec (node, pool, desired config) on create or change, the status on the status
// subresource (its observedGeneration the object's generation), and the object deleted once its
// node is gone from mcplane or from the cluster. Without the CRD the controller says so once
// in the log and writes nothing; it looks again now and then, so installing the CRD is enough.

import { apiKind, apiVersionOf } from '../../machineconfig/api-kinds.ts';
import { canonicalJson } from '../../machineconfig/index.ts';
import { machineConfigNodeObject } from '../../machineconfig/machine-config-node.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import { machineConfigNodes } from '../cache/machine-config-nodes.ts';
import { kubeFailureOf, type KubernetesAccess } from '../kubernetes/kube-client.ts';
import type { Controller, ReconcileResult } from './controller.ts';

// Where the cluster serves the kind: the catalogue's entry.
const { group: GROUP, version: VERSION, plural: PLURAL } = apiKind('MachineConfigNode');
const RETRY_AFTER_FAILURE_MS = 5000;
/** How often a cluster without the CRD is asked again. */
const RECHECK_CRD_MS = 5 * 60_000;

interface ClusterMcn {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; generation?: number; resourceVersion?: string; [k: string]: unknown };
  spec?: unknown;
  status?: Record<string, unknown>;
}

export class MachineConfigNodeController implements Controller {
  readonly name = 'machine-config-nodes';
  readonly leaderOnly = true;
  /** undefined until the first look; false: the cluster has no MachineConfigNode CRD. */
  #crd: boolean | undefined;
  #saidAbsent = false;
  /** Without the CRD, node changes ask nothing of the API server until this time. */
  #recheckAt = 0;

  private readonly cache: ClusterCache;
  private readonly access: KubernetesAccess;
  private readonly log: Logger;
  constructor(
    cache: ClusterCache,
    access: KubernetesAccess,
    log: Logger,
  ) {
    this.cache = cache;
    this.access = access;
    this.log = log;
  }

  interestedIn(change: CacheChange): boolean {
    return change.nodes.size > 0 || change.resync === true;
  }

  async reconcile(signal?: AbortSignal): Promise<ReconcileResult> {
    if (this.#crd === false && Date.now() < this.#recheckAt) return { requeueAfterMs: this.#recheckAt - Date.now() };
    let existing: Map<string, ClusterMcn>;
    try {
      const list = await this.access.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL }) as { items?: ClusterMcn[] };
      existing = new Map((list.items ?? []).map((o) => [o.metadata.name, o]));
    } catch (err) {
      const failure = kubeFailureOf(err);
      if (failure.code === 404) {
        if (!this.#saidAbsent) this.log.info({ resource: `${PLURAL}.${GROUP}` }, 'the cluster has no MachineConfigNode CRD: MachineConfigNode objects are not written there (mcctl get mcn serves them)');
        this.#saidAbsent = true;
        this.#crd = false;
        this.#recheckAt = Date.now() + RECHECK_CRD_MS;
        return { requeueAfterMs: RECHECK_CRD_MS };
      }
      this.log.warn({ err: failure.message }, 'cannot list MachineConfigNodes in the cluster; retrying');
      return { requeueAfterMs: RETRY_AFTER_FAILURE_MS };
    }
    if (this.#crd !== true) this.log.info({ objects: existing.size }, 'the cluster has the MachineConfigNode CRD: keeping a MachineConfigNode per node there');
    this.#crd = true;
    this.#saidAbsent = false;

    // MCO keeps one for each Node of the cluster: mcplane for each it manages that is one.
    const wanted = (await machineConfigNodes(this.cache, this.cache.store, '')).filter((m) => this.cache.kubernetesNodes.has(m.name));
    let failed = false;
    const attempt = async (what: string, name: string, work: () => Promise<unknown>): Promise<unknown> => {
      signal?.throwIfAborted();
      try {
        return await work();
      } catch (err) {
        if (signal?.aborted) throw err;
        const failure = kubeFailureOf(err);
        // 409: changed meanwhile; the next pass reads it again. 404 on delete: gone already.
        if (failure.code === 404 && what === 'delete') return undefined;
        failed = true;
        if (failure.code !== 409) this.log.warn({ node: name, err: failure.message }, `cannot ${what} the node's MachineConfigNode in the cluster; retrying`);
        return undefined;
      }
    };
    for (const m of wanted) {
      const object = machineConfigNodeObject(m) as { spec: unknown; status: Record<string, unknown> };
      let current = existing.get(m.name);
      if (!current) {
        current = await attempt('create', m.name, () => this.access.custom.createClusterCustomObject({
          group: GROUP, version: VERSION, plural: PLURAL,
          body: { apiVersion: apiVersionOf('MachineConfigNode'), kind: 'MachineConfigNode', metadata: { name: m.name }, spec: object.spec },
        })) as ClusterMcn | undefined;
        if (!current) continue;
      } else if (canonicalJson(current.spec) !== canonicalJson(object.spec)) {
        current = await attempt('update', m.name, () => this.access.custom.replaceClusterCustomObject({
          group: GROUP, version: VERSION, plural: PLURAL, name: m.name, body: { ...current, spec: object.spec },
        })) as ClusterMcn | undefined;
        if (!current) continue;
      }
      // The status answers the object's spec as the API server numbers it.
      const status = { ...object.status, observedGeneration: current.metadata.generation ?? 1 };
      if (canonicalJson(current.status ?? {}) === canonicalJson(status)) continue;
      const body = { ...current, status };
      await attempt('write the status of', m.name, () => this.access.custom.replaceClusterCustomObjectStatus({ group: GROUP, version: VERSION, plural: PLURAL, name: m.name, body }));
    }
    const names = new Set(wanted.map((m) => m.name));
    for (const name of existing.keys()) {
      if (names.has(name)) continue;
      await attempt('delete', name, () => this.access.custom.deleteClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, name }));
    }
    return failed ? { requeueAfterMs: RETRY_AFTER_FAILURE_MS } : {};
  }
}
