// When a node counts as updated, ready, unavailable or degraded: the definitions the pool's
// counts and the rollout's budget both rest on, kept in one place so they cannot disagree.

import type { NodeRecord, NodeState } from './types.ts';

/**
 * The states of a node whose update failed and waits for an operator. RolledBack and
 * TryReverted nodes run their previous config, but their update failed all the same.
 */
export const FAILED_NODE_STATES: ReadonlySet<string> = new Set<NodeState>(['Degraded', 'Unreconcilable', 'RolledBack', 'TryReverted']);

export function isDegraded(node: NodeRecord): boolean {
  return FAILED_NODE_STATES.has(node.status.state);
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
