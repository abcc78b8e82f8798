// The Kubernetes calls the leader makes on nodes and their pods: cordon, MCO's annotations, the
// pods a drain must move, and evictions through the Eviction API (policy/v1) so that every
// PodDisruptionBudget is honoured by the API server itself. Everything goes through the real
// @kubernetes/client-node; callers see plain results, never its exception types.

import {
  ApiException,
  CoreV1Api,
  PatchStrategy,
  PolicyV1Api,
  setHeaderOptions,
  type KubeConfig,
  type V1Node,
  type V1Pod,
  type V1PodDisruptionBudget,
} from '@kubernetes/client-node';
import { matchesSelector } from '../../machineconfig/index.ts';
import type { LabelSelector } from '../../machineconfig/index.ts';

/** What an eviction request came to. */
export type EvictionResult =
  | { outcome: 'evicted' }
  /** The pod is gone already. */
  | { outcome: 'gone' }
  /** 429: a PodDisruptionBudget (or the API server's throttling) refused it for now. */
  | { outcome: 'refused'; budget: string; disruptionsAllowed: number | null; message: string }
  | { outcome: 'failed'; message: string };

export interface PodOnNode {
  namespace: string;
  name: string;
  /** Already being deleted (an eviction was accepted): the drain waits for it to go. */
  terminating: boolean;
}

/** The one prefix MCO's node annotations share. */
export const MCO_ANNOTATION_PREFIX = 'machineconfiguration.openshift.io/';

export class NodeOperations {
  readonly #core: CoreV1Api;
  readonly #policy: PolicyV1Api;

  constructor(readonly kubeConfig: KubeConfig) {
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
    this.#policy = kubeConfig.makeApiClient(PolicyV1Api);
  }

  async listNodes(): Promise<{ nodes: V1Node[]; resourceVersion: string }> {
    const list = await this.#core.listNode();
    return { nodes: list.items, resourceVersion: list.metadata?.resourceVersion ?? '' };
  }

  /** Sets spec.unschedulable; returns the node as the API server now has it. */
  async setUnschedulable(node: string, unschedulable: boolean): Promise<V1Node> {
    return this.#patchNode(node, { spec: { unschedulable } });
  }

  /** Sets (string) or removes (null) annotations in one merge patch. */
  async patchAnnotations(node: string, annotations: Record<string, string | null>): Promise<V1Node> {
    return this.#patchNode(node, { metadata: { annotations } });
  }

  /**
   * The pods a drain must move off `node`: all but DaemonSet pods (their controller ignores the
   * cordon and would put them straight back) and mirror pods (the kubelet's static pods; the API
   * cannot evict them). Pods with emptyDir volumes are included: their data is scratch by design.
   */
  async podsToEvict(node: string): Promise<PodOnNode[]> {
    const list = await this.#core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` });
    return list.items.filter(mustEvict).map((p) => ({
      namespace: p.metadata?.namespace ?? 'default',
      name: p.metadata?.name ?? '',
      terminating: Boolean(p.metadata?.deletionTimestamp),
    }));
  }

  /**
   * Asks the API server to evict the pod. No grace period is set in the request, so the pod's
   * own terminationGracePeriodSeconds applies.
   */
  async evict(pod: { namespace: string; name: string }): Promise<EvictionResult> {
    try {
      await this.#core.createNamespacedPodEviction({
        name: pod.name,
        namespace: pod.namespace,
        body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod.name, namespace: pod.namespace } },
      });
      return { outcome: 'evicted' };
    } catch (err) {
      const status = apiStatus(err);
      if (status?.code === 404) return { outcome: 'gone' };
      if (status?.code === 429) {
        const budget = await this.#budgetFor(pod, status.causes).catch(() => undefined);
        return { outcome: 'refused', budget: budget?.metadata?.name ?? '', disruptionsAllowed: budget?.status?.disruptionsAllowed ?? null, message: status.message };
      }
      return { outcome: 'failed', message: status ? `HTTP ${status.code}: ${status.message}` : (err as Error).message };
    }
  }

  async #patchNode(node: string, body: object): Promise<V1Node> {
    return this.#core.patchNode({ name: node, body }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
  }

  /** The budget the API server named in its refusal, or the one whose selector matches the pod. */
  async #budgetFor(pod: { namespace: string; name: string }, causes: string[]): Promise<V1PodDisruptionBudget | undefined> {
    const named = causes.map((c) => /disruption budget (\S+)/i.exec(c)?.[1]).find(Boolean);
    if (named) return this.#policy.readNamespacedPodDisruptionBudget({ name: named, namespace: pod.namespace });
    const [budgets, found] = await Promise.all([
      this.#policy.listNamespacedPodDisruptionBudget({ namespace: pod.namespace }),
      this.#core.readNamespacedPod({ name: pod.name, namespace: pod.namespace }),
    ]);
    const labels = found.metadata?.labels ?? {};
    return budgets.items.find((b) => b.spec?.selector && matchesSelector(b.spec.selector as LabelSelector, labels));
  }
}

function mustEvict(pod: V1Pod): boolean {
  if (pod.metadata?.annotations?.['kubernetes.io/config.mirror'] !== undefined) return false;
  if (pod.metadata?.ownerReferences?.some((o) => o.kind === 'DaemonSet' && o.controller)) return false;
  return true;
}

interface ApiStatus {
  code: number;
  message: string;
  /** details.causes[].message */
  causes: string[];
}

/** The Kubernetes Status an API call failed with, whatever shape the client gave it in. */
export function apiStatus(err: unknown): ApiStatus | undefined {
  if (!(err instanceof ApiException)) return undefined;
  let body: unknown = err.body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body);
    } catch {
      // not JSON: the text itself is the message
    }
  }
  const status = (typeof body === 'object' && body !== null ? body : {}) as { message?: string; details?: { causes?: { message?: string }[] } };
  return {
    code: err.code,
    message: status.message ?? (typeof body === 'string' ? body : err.message),
    causes: (status.details?.causes ?? []).map((c) => c.message ?? '').filter(Boolean),
  };
}
