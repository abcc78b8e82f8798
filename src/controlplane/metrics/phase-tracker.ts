// When each node entered the phase it is in, and how long the phases it left took.
//
// Durations are measured from the status reports THIS replica receives from the agents it holds
// (registration included: a node back from a reboot registers with its next phase), so two
// replicas never count the same transition and the fleet's histogram is the sum over replicas.
// A node whose stream is on another replica is followed through the cache, without observing:
// if it then moves here (after a reboot, say), the phase it was in still has its start time.
//
// The clock is this replica's memory: after a restart, a phase already under way counts from
// when this replica first saw it.

import type { NodeState, NodeStatus } from '../../machineconfig/index.ts';

/**
 * The phases the agent reports (the step table, src/agent/update-steps.ts; test/controlplane/phase-labels.test.ts
 * checks the two agree) and the leader's drain. Anything
 * else an agent sends is counted as "other": a label value per arbitrary string would let one
 * agent blow up every scrape.
 */
export const KNOWN_PHASES: readonly string[] = ['check', 'diff', 'plan', 'drain', 'hooks', 'apply', 'actions', 'reboot', 'validate', 'health', 'try', 'rollback', 'done', 'drift'];

export function phaseLabel(phase: string): string {
  return KNOWN_PHASES.includes(phase) ? phase : 'other';
}

interface Clock {
  phase: string;
  state: NodeState;
  since: number;
}

export class PhaseTracker {
  readonly #clocks = new Map<string, Clock>();

  private readonly observe: (phase: string, seconds: number) => void;
  private readonly now: () => number;
  constructor(observe: (phase: string, seconds: number) => void, now: () => number = Date.now) {
    this.observe = observe;
    this.now = now;
  }

  /**
   * A status for `node`. `local`: it came from an agent stream this replica holds, so a phase
   * it ends is observed here; otherwise (seen through the cache) only the clock moves.
   */
  report(node: string, status: Pick<NodeStatus, 'phase' | 'state'>, local: boolean): void {
    const now = this.now();
    const known = this.#clocks.get(node);
    if (known && known.phase === status.phase && known.state === status.state) return;
    // Only a phase the node worked in has a duration; sitting Degraded in one is not an update step.
    if (local && known && known.state === 'Working' && known.phase) this.observe(phaseLabel(known.phase), Math.max(0, now - known.since) / 1000);
    this.#clocks.set(node, { phase: status.phase, state: status.state, since: now });
  }

  forget(node: string): void {
    this.#clocks.delete(node);
  }

  /** Since when the node has been in its current phase and state (Unix ms), if known. */
  since(node: string): number | undefined {
    return this.#clocks.get(node)?.since;
  }
}
