// When a node counts as updated, ready, unavailable or degraded: the definitions the pool's
// counts and the rollout's budget both rest on, kept in one place so they cannot disagree.

import type { NodeRecord } from './types.ts';

export function isDegraded(node: NodeRecord): boolean {
  // RolledBack, TryReverted: the node runs its previous config, but its update failed and waits for an operator.
  return node.status.state === 'Degraded' || node.status.state === 'Unreconcilable' || node.status.state === 'RolledBack' || node.status.state === 'TryReverted';
}

/** Why a node is unavailable, or undefined when it is available. */
export function unavailableReason(node: NodeRecord): string | undefined {
  if (!node.connected) return 'disconnected';
  if (isDegraded(node)) return node.status.state.toLowerCase();
  if (node.desiredConfig !== node.status.currentConfig || node.status.state === 'Working') return 'updating';
  return undefined;
}

export function isUpdated(node: NodeRecord, target: string): boolean {
  return node.desiredConfig === target && node.status.currentConfig === target && node.status.state === 'Done';
}

export function isReady(node: NodeRecord, target: string): boolean {
  return isUpdated(node, target) && unavailableReason(node) === undefined;
}
