// Hands each pool's target to its nodes within maxUnavailable (decideRollout has the rules),
// persisting every decision before the assignment leaves for the agent.

import { decideRollout } from '../machineconfig/index.ts';
import type { AgentSessions } from './agent-sessions.ts';
import type { ClusterState } from './cluster-state.ts';
import type { Logger } from '../runtime/logger.ts';

export class RolloutController {
  constructor(
    private readonly state: ClusterState,
    private readonly sessions: AgentSessions,
    private readonly log: Logger,
  ) {}

  async reconcile(): Promise<void> {
    const assigned: string[] = [];
    const changes: { name: string; update: (n: { desiredConfig: string }) => void }[] = [];
    for (const [name, stored] of this.state.pools) {
      const { pool, target } = stored.value;
      if (!target) continue;
      const decision = decideRollout(pool, target, this.state.nodesInPool(name));
      if (decision.assign.length === 0) continue;
      this.log.info({ pool: name, target, nodes: decision.assign, maxUnavailable: decision.maxUnavailable, waiting: decision.waiting }, 'assigning config');
      for (const node of decision.assign) {
        changes.push({ name: node, update: (n) => { n.desiredConfig = target; } });
        assigned.push(node);
      }
    }
    if (changes.length === 0) return;
    await this.state.putNodes(changes);
    for (const node of assigned) this.sessions.sendAssignment(node);
  }
}
