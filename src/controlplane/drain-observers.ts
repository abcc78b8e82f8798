// A drain is the one update step the leader takes rather than the agent. What the agent's steps
// get from their status reports, the drain gets here: its steps become mcplane's events
// (`mcctl get events`), its duration a sample of the fleet's `drain` phase histogram, and its
// span a control-plane phase in the node's update history.

import type { UpdatePhase, UpdateRecord } from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import type { ClusterCache } from './cache/cluster-cache.ts';
import type { DrainController } from './controllers/drain-controller.ts';
import type { EventRecorder } from './controllers/event-recorder.ts';
import type { ServerMetrics } from './metrics/server-metrics.ts';
import type { NodeHistoryWriter } from './sessions/node-history-writer.ts';

export function observeDrains(drains: DrainController, to: { events: EventRecorder; metrics: ServerMetrics; history: NodeHistoryWriter; cache: ClusterCache; log: Logger }): void {
  drains.onEvent = (e) => {
    to.events.recordEvent({ type: e.type, reason: e.reason, object: `node/${e.node}`, message: e.message })
      .catch((err: unknown) => to.log.warn({ err, node: e.node, reason: e.reason }, 'could not record a drain event'));
    if (e.reason === 'Drained' && e.seconds !== undefined) to.metrics.observePhase('drain', e.seconds);
  };
  to.history.controlPlanePhases = (node, record) => drainPhases(to.cache, node, record);
}

/** The drain that preceded `record`'s update, from the leader's drain record (still there when the agent reports Done). */
export function drainPhases(cache: ClusterCache, node: string, record: UpdateRecord): UpdatePhase[] {
  const drain = cache.drains.get(node)?.value;
  if (!drain || drain.config !== record.toConfig) return [];
  return [{ name: 'drain', startedUnixMs: drain.startedAt, endedUnixMs: drain.drainedAt ?? 0, source: 'control-plane' }];
}
