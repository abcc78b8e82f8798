// The Kubernetes calls the leader makes on nodes and their pods: cordon, MCO's annotations, the
// pods a drain must move, and evictions through the Eviction API (policy/v1) so that every
// PodDisruptionBudget is honoured by the API server itself. Everything goes through the
// KubernetesAccess (the real @kubernetes/client-node); callers see plain results, never its
// exception types.
//
// Each call takes the caller's AbortSignal (a leader-only controller's run): once this replica
// stops leading, no further request is sent, so a deposed leader never cordons or evicts.

import { matchesSelector, type LabelSelector } from '../../machineconfig/index.ts';
import { kubeFailureOf, type KubernetesAccess, type V1Node, type V1Pod, type V1PodDisruptionBudget } from './kube-client.ts';

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
  /** Its labels, to find the budget covering it when a refusal names none. */
  labels: Record<string, string>;
  /** Already being deleted (an eviction was accepted): the drain waits for it to go. */
  terminating: boolean;
}

/** The one prefix MCO's node annotations share. */
export const MCO_ANNOTATION_PREFIX = 'machineconfiguration.openshift.io/';

export class NodeOperations {
  readonly access: KubernetesAccess;
  constructor(access: KubernetesAccess) {
    this.access = access;
  }

  /** Sets spec.unschedulable; returns the node as the API server now has it. */
  async setUnschedulable(node: string, unschedulable: boolean, signal?: AbortSignal): Promise<V1Node> {
    signal?.throwIfAborted();
    return this.#patchNode(node, { spec: { unschedulable } });
  }

  /** Sets (string) or removes (null) annotations in one merge patch. */
  async patchAnnotations(node: string, annotations: Record<string, string | null>, signal?: AbortSignal): Promise<V1Node> {
    signal?.throwIfAborted();
    return this.#patchNode(node, { metadata: { annotations } });
  }

  /**
   * The pods a drain must move off `node`: all but DaemonSet pods (their controller ignores the
   * cordon and would put them straight back) and mirror pods (the kubelet's static pods; the API
   * cannot evict them). Pods with emptyDir volumes are included: their data is scratch by design.
   */
  async podsToEvict(node: string, signal?: AbortSignal): Promise<PodOnNode[]> {
    signal?.throwIfAborted();
    const list = await this.access.core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` });
    return list.items.filter(mustEvict).map((p) => ({
      namespace: p.metadata?.namespace ?? 'default',
      name: p.metadata?.name ?? '',
      labels: p.metadata?.labels ?? {},
      terminating: Boolean(p.metadata?.deletionTimestamp),
    }));
  }

  /**
   * Asks the API server to evict the pod. No grace period is set in the request, so the pod's
   * own terminationGracePeriodSeconds applies.
   */
  async evict(pod: PodOnNode, signal?: AbortSignal): Promise<EvictionResult> {
    signal?.throwIfAborted();
    try {
      await this.access.core.createNamespacedPodEviction({
        name: pod.name,
        namespace: pod.namespace,
        body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod.name, namespace: pod.namespace } },
      });
      return { outcome: 'evicted' };
    } catch (err) {
      const failure = kubeFailureOf(err);
      if (failure.code === 404) return { outcome: 'gone' };
      if (failure.code === 429) {
        const causes = failure.causes.map((c) => c.message ?? '');
        const budget = await this.#budgetFor(pod, causes).catch(() => undefined);
        return { outcome: 'refused', budget: budget?.metadata?.name ?? '', disruptionsAllowed: budget?.status?.disruptionsAllowed ?? null, message: failure.message };
      }
      return { outcome: 'failed', message: failure.code ? `HTTP ${failure.code}: ${failure.message}` : failure.message };
    }
  }

  async #patchNode(node: string, body: object): Promise<V1Node> {
    return this.access.core.patchNode({ name: node, body }, this.access.patchAs.merge);
  }

  /** The budget the API server named in its refusal, or the one whose selector matches the pod. */
  async #budgetFor(pod: PodOnNode, causes: string[]): Promise<V1PodDisruptionBudget | undefined> {
    const named = causes.map((c) => /disruption budget (\S+)/i.exec(c)?.[1]).find(Boolean);
    if (named) return this.access.policy.readNamespacedPodDisruptionBudget({ name: named, namespace: pod.namespace });
    const budgets = await this.access.policy.listNamespacedPodDisruptionBudget({ namespace: pod.namespace });
    return budgets.items.find((b) => b.spec?.selector && matchesSelector(b.spec.selector as LabelSelector, pod.labels));
  }
}

function mustEvict(pod: V1Pod): boolean {
  if (pod.metadata?.annotations?.['kubernetes.io/config.mirror'] !== undefined) return false;
  if (pod.metadata?.ownerReferences?.some((o) => o.kind === 'DaemonSet' && o.controller)) return false;
  return true;
}

/** A failed call's message, for logs and reasons. */
export function failureMessage(err: unknown): string {
  const f = kubeFailureOf(err);
  return f.code ? `HTTP ${f.code}: ${f.message}` : f.message;
}
