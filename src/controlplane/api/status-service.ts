// StatusService: reads from this replica's cache only, so status reads never wait for the
// controllers or the store, on any replica.

import { status as Status, type ServerWritableStream } from '@grpc/grpc-js';
import { driftProposal, InvalidDocumentError, NotFoundError, PreconditionFailedError, ROLE_LABEL } from '../../machineconfig/index.ts';
import type { Node } from '../../runtime/generated/mcplane/v1/Node.ts';
import type { StatusServiceHandlers } from '../../runtime/generated/mcplane/v1/StatusService.ts';
import type { WatchEvent } from '../../runtime/generated/mcplane/v1/WatchEvent.ts';
import type { WatchRequest__Output } from '../../runtime/generated/mcplane/v1/WatchRequest.ts';
import type { Logger } from '../../runtime/logger.ts';
import { VERSION } from '../../runtime/version.ts';
import type { CacheChange, ClusterCache, NodeView } from '../cache/cluster-cache.ts';
import type { ListNodesResponse } from '../../runtime/generated/mcplane/v1/ListNodesResponse.ts';
import { PreEncoded } from '../../runtime/pre-encoded.ts';
import { loadMcplaneProto } from '../../runtime/proto.ts';
import { NodeListEncoder } from './node-list-encoding.ts';
import type { ApiReads, ServingReplica } from './api-access.ts';
import { unary } from './status-errors.ts';
import { eventToWire, nodeToWire, poolToWire } from './to-wire.ts';
import { machineConfigNode, machineConfigNodes } from '../cache/machine-config-nodes.ts';
import { machineConfigNodeToWire } from './machine-config-node-wire.ts';
import type { Event } from '../../runtime/generated/mcplane/v1/Event.ts';
import type { EventRecord } from '../store/stored-records.ts';
import type { StoredObject } from '../store/store.ts';

/** The start of the status a Watch stream is cut with when its client leaves too much unread. */
export const SLOW_WATCH_DETAILS = 'watch cut: this client read its events too slowly; watch again to get the current state';

/** The status a server ends Watch streams with when it shuts down. */
export const SHUTDOWN_DETAILS = 'the server is shutting down; reconnect (to another replica if there is one)';

/**
 * The handlers answer ListNodes and GetNode with PreEncoded bytes (node-list-encoding.ts): the
 * service must be registered wrapped by acceptingPreEncoded.
 */
export function statusService({ cache, store }: ApiReads, replica: ServingReplica, log: Logger): StatusServiceHandlers {
  const encoder = new NodeListEncoder(nodeToWire, loadMcplaneProto().grpc.mcplane.v1.StatusService.service.GetNode.responseSerialize);
  const pool = (name: string) => {
    const stored = cache.pools.get(name);
    if (!stored) throw new NotFoundError('MachineConfigPool', name);
    return poolToWire(stored, cache.poolStatuses.get(name)?.value.status);
  };
  const viewOf = (name: string): NodeView => {
    const view = cache.nodes.get(name);
    if (!view) throw new NotFoundError('Node', name);
    return view;
  };
  const node = (name: string) => nodeToWire(viewOf(name));
  // Typed as the message it stands for: the wrapped service writes its bytes as they are.
  const encodedNode = (name: string): Node => new PreEncoded(encoder.nodeBytes(viewOf(name))) as unknown as Node;
  // Who may call what is checked before a handler runs (access-rules.ts, guarded-service.ts).
  const read = <Req, Res>(fn: (req: Req) => Res) => unary<Req, Res>(log, (req) => fn(req));
  return {
    ListPools: read(() => ({ pools: [...cache.pools.keys()].sort().map(pool) })),
    GetPool: read((req: { name: string }) => pool(req.name)),
    ListNodes: read((req: { pool: string; limit: number; continueToken: string }): ListNodesResponse => {
      const { views, continueToken, remainingItemCount } = listNodes(cache, req);
      return encoder.listResponse(views, continueToken, remainingItemCount) as unknown as ListNodesResponse;
    }),
    GetNode: read((req: { name: string }) => encodedNode(req.name)),
    ListReplicas: read(() => {
      const leader = cache.leader?.value.replica;
      return {
        replicas: [...cache.replicas.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map((r) => ({
          name: r.name,
          address: r.value.address,
          leader: r.name === leader,
          lastHeartbeatUnixMs: r.value.heartbeatAt,
          version: r.value.version,
          startedUnixMs: r.value.startedAt,
          // This replica knows its own count now; the others' come from their last heartbeat.
          agentsConnected: r.name === replica.name ? replica.agentsConnected : r.value.agents,
        })),
      };
    }),
    GetServerInfo: read(() => ({ version: VERSION, replica: replica.name, store: store.backend, leader: replica.leading })),
    ListEvents: read((req: { node: string; pool: string; limit: number }) => ({ events: listEvents(cache, req) })),
    GetNodeHistory: unary(log, async (req: { name: string }) => {
      // Not cached (it is read only here): from the store, on whichever replica answers.
      const stored = await store.get('NodeHistory', req.name);
      if (!stored && !cache.nodes.has(req.name)) throw new NotFoundError('Node', req.name);
      return { node: req.name, updates: stored?.value.updates ?? [] };
    }),
    ListMachineConfigNodes: unary(log, async (req: { pool: string }) => ({
      machineConfigNodes: (await machineConfigNodes(cache, store, req.pool)).map(machineConfigNodeToWire),
    })),
    GetMachineConfigNode: unary(log, async (req: { name: string }) => {
      const m = await machineConfigNode(cache, store, req.name);
      if (!m) throw new NotFoundError('MachineConfigNode', req.name);
      return machineConfigNodeToWire(m);
    }),
    GetDriftProposal: read((req: { node: string }) => {
      const view = viewOf(req.node);
      const s = view.status;
      if (s.driftPolicy !== 'Adopt') {
        throw new PreconditionFailedError(`node ${req.node} acts on driftPolicy ${s.driftPolicy || 'Degrade'} (pool ${view.pool || '<none>'}): only a pool with spec.driftPolicy: Adopt has its nodes report the content of drifted files`);
      }
      if (s.drift.length === 0) throw new PreconditionFailedError(`node ${req.node} reports no drift: nothing to adopt`);
      // The labels that make the pool select the proposal: its selector's, else MCO's role label.
      const matchLabels = cache.pools.get(view.pool)?.value.spec.machineConfigSelector?.matchLabels;
      const poolLabels = matchLabels && Object.keys(matchLabels).length ? matchLabels : { [ROLE_LABEL]: view.pool };
      const proposal = driftProposal({ node: req.node, pool: view.pool, poolLabels, drift: s.drift });
      return { node: req.node, pool: view.pool, manifestJson: proposal.manifest ? JSON.stringify(proposal.manifest) : '', leftOut: proposal.leftOut };
    }),
    Watch(call: ServerWritableStream<WatchRequest__Output, WatchEvent>) {
      const none = !call.request.pools && !call.request.nodes && !call.request.events;
      const wantPools = call.request.pools || none;
      const wantNodes = call.request.nodes || none;
      const wantEvents = call.request.events;
      // A client that reads slower than the cluster changes (or not at all) leaves its events in
      // this stream's buffer: past its initial list plus the backlog the stream is cut, so the
      // server's memory never grows with a slow client. The client watches again and relists.
      let limit = Infinity;
      let cut = false;
      const write = (event: WatchEvent): void => {
        if (cut) return;
        // A fleet that grew since the initial list relists more: the bound grows with what the
        // stream holds, so a client that reads keeps up whatever the size.
        const bound = Math.max(limit, sentPools.size + sentNodes.size + sentEvents.size + replica.watchBacklog);
        if (call.writableLength >= bound) {
          cut = true;
          stop();
          log.warn({ peer: call.getPeer(), unread: call.writableLength, backlog: replica.watchBacklog }, 'Watch client too slow; stream cut');
          call.emit('error', { code: Status.RESOURCE_EXHAUSTED, details: `${SLOW_WATCH_DETAILS} (${call.writableLength} events unread; the bound is ${bound})` });
          return;
        }
        call.write(event);
      };
      // What this stream has sent, so each change goes out as ADDED, MODIFIED or DELETED.
      const stream = <K extends 'pool' | 'node' | 'event'>(kind: K, exists: (name: string) => boolean, toWire: (name: string) => WatchEvent[K]) => {
        const sent = new Set<string>();
        const send = (name: string): void => {
          if (!exists(name)) {
            if (sent.delete(name)) write({ type: 'DELETED', [kind]: { name } });
            return;
          }
          write({ type: sent.has(name) ? 'MODIFIED' : 'ADDED', [kind]: toWire(name) });
          sent.add(name);
        };
        return { sent, send };
      };
      const { sent: sentPools, send: sendPool } = stream('pool', (n) => cache.pools.has(n), pool);
      const { sent: sentNodes, send: sendNode } = stream('node', (n) => cache.nodes.has(n), node);
      const { sent: sentEvents, send: sendEvent } = stream('event', (n) => cache.events.has(n), (n) => eventToWire(cache.events.get(n)!));
      const onChange = (change: CacheChange): void => {
        if (wantPools) {
          const names = change.resync
            ? new Set([...cache.pools.keys(), ...sentPools])
            : new Set([...(change.changed.get('MachineConfigPool') ?? []), ...(change.changed.get('PoolStatus') ?? [])]);
          for (const name of [...names].sort()) sendPool(name);
        }
        if (wantNodes) {
          const names = change.resync ? new Set([...cache.nodes.keys(), ...sentNodes]) : change.nodes;
          for (const name of [...names].sort()) sendNode(name);
        }
        if (wantEvents) {
          const names = change.resync ? new Set([...cache.events.keys(), ...sentEvents]) : (change.changed.get('Event') ?? new Set<string>());
          for (const name of byTime(cache, names)) sendEvent(name);
        }
      };
      if (wantPools) for (const name of [...cache.pools.keys()].sort()) sendPool(name);
      if (wantNodes) for (const name of cache.sortedNodeNames()) sendNode(name);
      if (wantEvents) for (const name of byTime(cache, cache.events.keys())) sendEvent(name);
      call.write({ type: 'SYNCED' });
      // The initial list may wait in the buffer whole: the bound counts from there.
      limit = call.writableLength + replica.watchBacklog;
      const onShutdown = (): void => {
        stop();
        call.emit('error', { code: Status.UNAVAILABLE, details: SHUTDOWN_DETAILS });
      };
      const stop = (): void => {
        cache.off('change', onChange);
        replica.lifecycle.off('shutdown', onShutdown);
      };
      cache.on('change', onChange);
      replica.lifecycle.once('shutdown', onShutdown);
      call.on('cancelled', stop);
      call.on('close', stop);
      call.on('error', stop);
    },
  };
}

/**
 * Nodes in name order, paged like a Kubernetes list: the continue token names the last node of
 * the previous page, so a page stays correct while nodes come and go between pages.
 */
function listNodes(cache: ClusterCache, req: { pool: string; limit: number; continueToken: string }): { views: NodeView[]; continueToken: string; remainingItemCount: number } {
  if (req.limit < 0) {
    throw new InvalidDocumentError([{ object: 'ListNodesRequest', field: 'limit', rule: 'non-negative', message: `limit must be 0 (everything) or more, not ${req.limit}` }]);
  }
  let after = '';
  if (req.continueToken) {
    after = Buffer.from(req.continueToken, 'base64url').toString('utf8');
    if (!after.startsWith('n:')) {
      throw new InvalidDocumentError([{ object: 'ListNodesRequest', field: 'continueToken', rule: 'continue-token', message: 'the continue token is not one this server issued; start the list again without it' }]);
    }
    after = after.slice(2);
  }
  const names = cache.sortedNodeNames();
  let start = 0;
  if (after) {
    // Binary search: the first name after the token's.
    let lo = 0;
    let hi = names.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (names[mid]! <= after) lo = mid + 1;
      else hi = mid;
    }
    start = lo;
  }
  const views: NodeView[] = [];
  let i = start;
  for (; i < names.length && (req.limit === 0 || views.length < req.limit); i++) {
    const view = cache.nodes.get(names[i]!);
    if (view && (!req.pool || view.pool === req.pool)) views.push(view);
  }
  if (i >= names.length) return { views, continueToken: '', remainingItemCount: 0 };
  const remaining = req.pool
    ? names.slice(i).filter((n) => cache.nodes.get(n)?.pool === req.pool).length
    : names.length - i;
  if (remaining === 0) return { views, continueToken: '', remainingItemCount: 0 };
  return { views, continueToken: Buffer.from(`n:${views.at(-1)?.name ?? names[i - 1]}`).toString('base64url'), remainingItemCount: remaining };
}

/** Events oldest first (deleted ones, still to be announced, last). */
function byTime(cache: ClusterCache, names: Iterable<string>): string[] {
  const at = (n: string): number => cache.events.get(n)?.value.lastTimestamp ?? Number.MAX_SAFE_INTEGER;
  return [...names].sort((a, b) => at(a) - at(b) || (a < b ? -1 : 1));
}

/** Recent events, oldest first, filtered by node or pool; the most recent `limit` of them. */
function listEvents(cache: ClusterCache, req: { node: string; pool: string; limit: number }): Event[] {
  if (req.limit < 0) {
    throw new InvalidDocumentError([{ object: 'ListEventsRequest', field: 'limit', rule: 'non-negative', message: `limit must be 0 (every event kept) or more, not ${req.limit}` }]);
  }
  const wanted = (e: StoredObject<EventRecord>): boolean =>
    (!req.node || e.value.object === `node/${req.node}`)
    && (!req.pool || e.value.pool === req.pool || e.value.object === `pool/${req.pool}`);
  const events = [...cache.events.values()].filter(wanted)
    .sort((a, b) => a.value.lastTimestamp - b.value.lastTimestamp || a.value.firstTimestamp - b.value.firstTimestamp || (a.name < b.name ? -1 : 1));
  return (req.limit ? events.slice(-req.limit) : events).map(eventToWire);
}
