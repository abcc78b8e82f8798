// POST pods/{name}/eviction (policy/v1 Eviction), following the apiserver's eviction REST
// handler (pkg/registry/core/pod/storage/eviction.go): pods that are already terminating,
// finished or still pending ignore budgets; more than one matching budget is an internal
// error; a Ready pod needs the budget to allow a disruption, else 429 with the budget named
// in the cause; an unready pod may go while the budget is met (IfHealthyBudget, the default)
// or always (AlwaysAllow). An accepted eviction deletes the pod gracefully.

import { apiErrors, type ApiStatus } from './api-status.ts';
import { budgetStatus, isPodReady, podsOfBudget } from './disruption-budgets.ts';
import type { GracefulDeletion } from './graceful-deletion.ts';
import type { KubeObject, ObjectStore } from './object-store.ts';
import type { ResourceType } from './resource-table.ts';

export interface EvictionContext {
  store: ObjectStore;
  pods: ResourceType;
  budgets: ResourceType;
  deletion: GracefulDeletion;
}

const SUCCESS: ApiStatus = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', message: '', reason: '', code: 201 };

export function evictPod(ctx: EvictionContext, namespace: string, name: string, body: Record<string, any>): ApiStatus {
  if (body?.kind !== undefined && body.kind !== 'Eviction') throw apiErrors.badRequest(`expected an Eviction, got ${body.kind}`);
  if (body?.metadata?.name !== undefined && body.metadata.name !== name) {
    throw apiErrors.badRequest(`name in URL does not match name in Eviction object`);
  }
  const pod = ctx.store.get(ctx.pods, namespace, name);
  if (!pod) throw apiErrors.notFound('', 'pods', name);
  const grace: number | undefined = body?.deleteOptions?.gracePeriodSeconds;
  const phase = pod.status?.phase;
  if (pod.metadata.deletionTimestamp || phase === 'Succeeded' || phase === 'Failed' || phase === 'Pending') {
    ctx.deletion.delete(pod, grace);
    return SUCCESS;
  }
  const allPods = ctx.store.list(ctx.pods, namespace);
  const budgets = ctx.store.list(ctx.budgets, namespace).filter((pdb) => podsOfBudget(pdb, [pod]).length === 1);
  if (budgets.length > 1) {
    throw apiErrors.internal('Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.');
  }
  const pdb: KubeObject | undefined = budgets[0];
  if (pdb) {
    const status = budgetStatus(pdb, allPods);
    if (isPodReady(pod)) {
      if (status.disruptionsAllowed <= 0) throw refusal(pdb.metadata.name, status.desiredHealthy, status.currentHealthy);
    } else if (pdb.spec?.unhealthyPodEvictionPolicy !== 'AlwaysAllow' &&
      !(status.currentHealthy >= status.desiredHealthy && status.desiredHealthy > 0)) {
      throw refusal(pdb.metadata.name, status.desiredHealthy, status.currentHealthy);
    }
  }
  ctx.deletion.delete(pod, grace);
  return SUCCESS;
}

function refusal(budget: string, desired: number, current: number) {
  return apiErrors.tooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", [
    { reason: 'DisruptionBudget', message: `The disruption budget ${budget} needs ${desired} healthy pods and has ${current} currently` },
  ]);
}
