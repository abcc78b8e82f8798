// What a node's status looks like to readers (mcctl, Watch, the pool's conditions, MCO's node
// annotations): the agent's own report joined with what the leader is doing to the node before
// the agent may act. A drain happens while the agent still reports Done on its old config; without
// this join the node would look idle while its pods are being evicted, which is MCO's "stuck with
// no visible reason".

import type { NodeStatus } from '../../machineconfig/index.ts';
import type { NodeDrainRecord } from '../store/stored-records.ts';

export function displayedStatus(status: NodeStatus, desiredConfig: string, drain: NodeDrainRecord | undefined, drainNote: string | undefined): NodeStatus {
  if (drain?.phase === 'Draining') {
    const idle = status.state === 'Done';
    return {
      ...status,
      state: drain.degraded ? 'Degraded' : idle ? 'Working' : status.state,
      phase: idle ? 'drain' : status.phase,
      reason: joinReasons(drain.reason, status.reason),
    };
  }
  // Done means done: a node assigned another config whose agent has not reported on it yet (its
  // last report is Done on the old one, as when a drain ends) is Working, or it reads Working,
  // Done, Working while the agent takes the config.
  const shown = status.state === 'Done' && desiredConfig !== '' && status.currentConfig !== desiredConfig
    ? { ...status, state: 'Working' as const, desiredConfig, phase: status.phase === 'done' || status.phase === '' ? 'assigned' : status.phase }
    : status;
  if (drain?.phase === 'Drained') {
    // The agent has the config now; its own words come first.
    return shown.reason ? shown : { ...shown, reason: drain.reason };
  }
  const updating = status.currentConfig !== desiredConfig || status.state !== 'Done';
  if (drainNote && desiredConfig && updating) return { ...shown, reason: joinReasons(status.reason, drainNote) };
  return shown;
}

function joinReasons(first: string, second: string): string {
  return first && second ? `${first}; ${second}` : first || second;
}
