// Domain objects to wire messages. Field names match on both sides (camelCase), so these are
// mostly about JSON-encoding the parts the contract carries as JSON.

import type { MachineConfig as DomainMachineConfig, MachineConfigPool as DomainPool, PoolStatus } from '../../machineconfig/index.ts';
import type { MachineConfig } from '../../runtime/generated/mcplane/v1/MachineConfig.ts';
import type { MachineConfigPool } from '../../runtime/generated/mcplane/v1/MachineConfigPool.ts';
import type { Node } from '../../runtime/generated/mcplane/v1/Node.ts';
import type { RenderedConfig } from '../../runtime/generated/mcplane/v1/RenderedConfig.ts';
import type { NodeView } from '../cache/cluster-cache.ts';
import type { StoredObject } from '../store/store.ts';
import type { Event } from '../../runtime/generated/mcplane/v1/Event.ts';
import type { EventRecord, StoredRendered } from '../store/stored-records.ts';

export function poolToWire(stored: StoredObject<DomainPool>, status: PoolStatus | undefined): MachineConfigPool {
  const pool = stored.value;
  return {
    name: pool.metadata.name,
    labels: pool.metadata.labels ?? {},
    specJson: JSON.stringify(pool.spec),
    paused: pool.spec.paused,
    maxUnavailable: String(pool.spec.maxUnavailable),
    resourceVersion: stored.resourceVersion,
    creationTimeUnixMs: stored.createdAt,
    status: status
      ? { ...status, conditions: status.conditions.map(({ lastTransitionTime, ...c }) => ({ ...c, lastTransitionTimeUnixMs: lastTransitionTime })) }
      : null,
  };
}

const wireNodes = new WeakMap<NodeView, Node>();

/** Node views are immutable, so each is converted once however often it is read. */
export function nodeToWire(node: NodeView): Node {
  let wire = wireNodes.get(node);
  if (!wire) {
    wire = convertNode(node);
    wireNodes.set(node, wire);
  }
  return wire;
}

function convertNode(node: NodeView): Node {
  const reason = node.status.reason
    || (node.poolError ? `pool: ${node.poolError}` : '')
    || (node.ignoredLabels ? `labels: the agent asked for ${Object.entries(node.ignoredLabels).map(([k, v]) => (v ? `${k}=${v}` : k)).join(', ')}, not admitted: a node's role comes from its credential's pool, and after it registers its labels change only with mcctl label node` : '');
  return {
    name: node.name,
    labels: node.labels,
    pool: node.pool,
    registrationTimeUnixMs: node.registeredAt,
    resourceVersion: node.resourceVersion,
    certificateNotAfterUnixMs: node.certificate?.notAfter ?? 0,
    status: {
      ...node.status,
      reason,
      // The content Adopt reports stays on the server: every list and watch would carry it
      // otherwise. GetDriftProposal serves it.
      drift: node.status.drift.map(({ contentBase64: _content, ...d }) => d),
      // The control plane's decision is the node's desired config; the agent's echo may lag.
      desiredConfig: node.desiredConfig,
      lastSeenUnixMs: node.lastSeen,
      connected: node.connected,
    },
  };
}

export function machineConfigToWire(stored: StoredObject<DomainMachineConfig>): MachineConfig {
  return {
    name: stored.name,
    manifestJson: JSON.stringify(stored.value),
    resourceVersion: stored.resourceVersion,
    creationTimeUnixMs: stored.createdAt,
  };
}

/**
 * `references` is referencedConfigs(cache), computed once per request; `specJson` the spec's text
 * as the cache keeps it for the agents (ClusterCache.renderedConfig), or '' in a list.
 */
export function renderedToWire(stored: StoredObject<StoredRendered>, references: Map<string, string[]>, specJson = ''): RenderedConfig {
  return {
    name: stored.name,
    pool: stored.value.pool,
    specJson,
    sources: stored.value.sources,
    creationTimeUnixMs: stored.createdAt,
    referencedBy: references.get(stored.name) ?? [],
  };
}

export function eventToWire(stored: StoredObject<EventRecord>): Event {
  const e = stored.value;
  return {
    name: stored.name, type: e.type, reason: e.reason, object: e.object, message: e.message, pool: e.pool,
    firstTimestampUnixMs: e.firstTimestamp, lastTimestampUnixMs: e.lastTimestamp, count: e.count,
  };
}
