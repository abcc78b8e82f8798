// What Kubernetes' disruption controller computes for a policy/v1 PodDisruptionBudget, done
// live by the stand-in: expected pods are the pods its selector matches (terminating ones
// included, as a controller's scale still counts them), healthy ones are Ready and not being
// deleted, and the desired number follows minAvailable or maxUnavailable (an int or a
// percent of the expected pods, rounded up, as GetScaledValueFromIntOrPercent(..., true)).

import { matchesLabelSelector } from './selectors.ts';
import type { KubeObject } from './object-store.ts';

export interface BudgetStatus {
  expectedPods: number;
  currentHealthy: number;
  desiredHealthy: number;
  disruptionsAllowed: number;
}

export function isPodReady(pod: KubeObject): boolean {
  return !pod.metadata.deletionTimestamp &&
    (pod.status?.conditions ?? []).some((c: { type: string; status: string }) => c.type === 'Ready' && c.status === 'True');
}

function scaled(value: number | string, total: number): number {
  if (typeof value === 'number') return value;
  const m = /^(\d+)%$/.exec(value);
  return m ? Math.ceil((Number(m[1]) * total) / 100) : Number(value);
}

export function podsOfBudget(pdb: KubeObject, pods: KubeObject[]): KubeObject[] {
  return pods.filter((p) => p.metadata.namespace === pdb.metadata.namespace && matchesLabelSelector(pdb.spec?.selector, p.metadata.labels));
}

export function budgetStatus(pdb: KubeObject, allPods: KubeObject[]): BudgetStatus {
  const pods = podsOfBudget(pdb, allPods);
  const expectedPods = pods.length;
  const currentHealthy = pods.filter(isPodReady).length;
  let desiredHealthy = 0;
  if (pdb.spec?.minAvailable !== undefined) desiredHealthy = scaled(pdb.spec.minAvailable, expectedPods);
  else if (pdb.spec?.maxUnavailable !== undefined) desiredHealthy = Math.max(0, expectedPods - scaled(pdb.spec.maxUnavailable, expectedPods));
  return { expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed: Math.max(0, currentHealthy - desiredHealthy) };
}

/** The status block the disruption controller writes, DisruptionAllowed condition included. */
export function budgetStatusObject(pdb: KubeObject, status: BudgetStatus, previous: Record<string, any> | undefined): Record<string, any> {
  const allowed = status.disruptionsAllowed > 0;
  const old = (previous?.conditions ?? []).find((c: { type: string }) => c.type === 'DisruptionAllowed');
  const conditionStatus = allowed ? 'True' : 'False';
  return {
    observedGeneration: pdb.metadata.generation,
    ...status,
    conditions: [{
      type: 'DisruptionAllowed',
      status: conditionStatus,
      reason: allowed ? 'SufficientPods' : 'InsufficientPods',
      message: '',
      observedGeneration: pdb.metadata.generation,
      lastTransitionTime: old && old.status === conditionStatus ? old.lastTransitionTime : new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    }],
  };
}
