// Whether a node's next config must wait for a drain. The rollout asks this when it assigns a
// config, and writes the answer in the same record as the config (holdForDrain), so the replica
// holding the node's stream can never send the config before the drain has started.

import { needsDrain } from '../../machineconfig/index.ts';
import type { ClusterCache, NodeView } from '../cache/cluster-cache.ts';
import { planNodeUpdate } from '../cache/node-update-plan.ts';
import type { NodeAssignmentRecord } from '../store/stored-records.ts';

/** What the drain side of the control plane can tell the rollout. */
export interface DrainAccess {
  /** Kubernetes access is configured: drains happen. */
  readonly enabled: boolean;
  /** This leader has stored a full list of the cluster's Nodes at least once. */
  readonly nodesSynced: boolean;
}

export type DrainDecision =
  | { hold: true }
  | { hold: false; note?: string }
  /** Not decidable yet (the cluster's Nodes are not listed): assign nothing to this node now. */
  | { wait: string };

export function drainDecision(cache: ClusterCache, node: NodeView, target: string, access: DrainAccess | undefined): DrainDecision {
  if (!access?.enabled) return { hold: false };
  const plan = planNodeUpdate(cache, node, target);
  // A plan that cannot be made (a rendered config missing) is treated as the worst case.
  if (plan && !needsDrain(plan.plan)) return { hold: false };
  if (!access.nodesSynced) return { wait: 'the cluster\'s Nodes are not listed yet' };
  if (!cache.kubernetesNodes.has(node.name)) return { hold: false, note: `not drained: the cluster has no Node named ${node.name}` };
  if (cache.kubernetesNodes.size <= 1) return { hold: false, note: 'not drained: a single-node cluster has nowhere to move its pods' };
  return { hold: true };
}

/** The assignment with no drain hold and no drain note: what a drain leaves, and a new config starts from. */
export function withoutDrainHold(a: NodeAssignmentRecord): NodeAssignmentRecord {
  const { holdForDrain: _held, drainNote: _note, ...rest } = a;
  return rest;
}
