// Wire messages as the objects an OpenShift user expects from `oc get ... -o yaml`.

import { API_VERSION } from '../machineconfig/constants.ts';
import type { MachineConfig__Output } from '../runtime/generated/mcplane/v1/MachineConfig.ts';
import type { MachineConfigPool__Output } from '../runtime/generated/mcplane/v1/MachineConfigPool.ts';
import type { Node__Output } from '../runtime/generated/mcplane/v1/Node.ts';
import type { RenderedConfig__Output } from '../runtime/generated/mcplane/v1/RenderedConfig.ts';
import type { Replica__Output } from '../runtime/generated/mcplane/v1/Replica.ts';

/** mcplane's own kinds (Node, Replica) are not Kubernetes' and say so in their apiVersion. */
export const MCPLANE_API_VERSION = 'mcplane.io/v1';

const iso = (ms: number): string | undefined => (ms ? new Date(ms).toISOString() : undefined);

export function poolObject(p: MachineConfigPool__Output): Record<string, unknown> {
  const s = p.status;
  return {
    apiVersion: API_VERSION,
    kind: 'MachineConfigPool',
    metadata: { name: p.name, ...(Object.keys(p.labels ?? {}).length ? { labels: p.labels } : {}), resourceVersion: p.resourceVersion, creationTimestamp: iso(p.creationTimeUnixMs) },
    spec: JSON.parse(p.specJson || '{}'),
    status: s && {
      configuration: { name: s.configuration, source: s.configurationSources.map((name) => ({ apiVersion: API_VERSION, kind: 'MachineConfig', name })) },
      machineCount: s.machineCount,
      updatedMachineCount: s.updatedMachineCount,
      readyMachineCount: s.readyMachineCount,
      unavailableMachineCount: s.unavailableMachineCount,
      degradedMachineCount: s.degradedMachineCount,
      conditions: s.conditions.map((c) => ({ type: c.type, status: c.status, reason: c.reason, message: c.message, lastTransitionTime: iso(c.lastTransitionTimeUnixMs) })),
    },
  };
}

export function nodeObject(n: Node__Output): Record<string, unknown> {
  const { lastSeenUnixMs, ...status } = n.status ?? ({} as NonNullable<Node__Output['status']>);
  return {
    apiVersion: MCPLANE_API_VERSION,
    kind: 'Node',
    metadata: { name: n.name, labels: n.labels, resourceVersion: n.resourceVersion, creationTimestamp: iso(n.registrationTimeUnixMs) },
    pool: n.pool,
    status: { ...status, lastSeen: iso(lastSeenUnixMs) },
  };
}

export function machineConfigObject(mc: MachineConfig__Output): Record<string, unknown> {
  const manifest = JSON.parse(mc.manifestJson) as { metadata: Record<string, unknown> };
  return { apiVersion: API_VERSION, kind: 'MachineConfig', ...manifest, metadata: { ...manifest.metadata, resourceVersion: mc.resourceVersion, creationTimestamp: iso(mc.creationTimeUnixMs) } };
}

export function renderedObject(r: RenderedConfig__Output): Record<string, unknown> {
  return {
    apiVersion: API_VERSION,
    kind: 'MachineConfig',
    metadata: {
      name: r.name,
      creationTimestamp: iso(r.creationTimeUnixMs),
      annotations: { 'mcplane.io/pool': r.pool, 'mcplane.io/source-configs': r.sources.join(','), 'mcplane.io/referenced-by': r.referencedBy.join(',') },
    },
    ...(r.specJson ? { spec: JSON.parse(r.specJson) } : {}),
  };
}

export function replicaObject(r: Replica__Output): Record<string, unknown> {
  return {
    apiVersion: MCPLANE_API_VERSION,
    kind: 'Replica',
    metadata: { name: r.name, creationTimestamp: iso(r.startedUnixMs) },
    status: { address: r.address, leader: r.leader, agentsConnected: r.agentsConnected, version: r.version, lastHeartbeat: iso(r.lastHeartbeatUnixMs) },
  };
}

export function condition(p: MachineConfigPool__Output, type: string): string {
  return p.status?.conditions.find((c) => c.type === type)?.status ?? 'Unknown';
}
