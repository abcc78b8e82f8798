import type { ServerWritableStream } from '@grpc/grpc-js';
import { NotFoundError } from '../../machineconfig/index.ts';
import type { StatusServiceHandlers } from '../../runtime/generated/mcplane/v1/StatusService.ts';
import type { WatchEvent } from '../../runtime/generated/mcplane/v1/WatchEvent.ts';
import type { WatchRequest__Output } from '../../runtime/generated/mcplane/v1/WatchRequest.ts';
import type { Logger } from '../../runtime/logger.ts';
import { VERSION } from '../../runtime/version.ts';
import type { ControlPlane } from '../control-plane.ts';
import type { WatchNotice } from '../watch-hub.ts';
import type { Authorizer } from './authorization.ts';
import { toServiceError, unary } from './status-errors.ts';
import { nodeToWire, poolToWire } from './to-wire.ts';

export function statusService(cp: ControlPlane, auth: Authorizer, log: Logger): StatusServiceHandlers {
  const pool = (name: string) => {
    const stored = cp.state.pools.get(name);
    if (!stored) throw new NotFoundError('MachineConfigPool', name);
    return poolToWire(stored, cp.statuses.status(name));
  };
  const node = (name: string) => {
    const entry = cp.state.nodes.get(name);
    if (!entry) throw new NotFoundError('Node', name);
    return nodeToWire(entry);
  };
  const admin = <Req, Res>(fn: (req: Req) => Res) => unary<Req, Res>(log, (req, call) => {
    auth.requireAdmin(call);
    return fn(req);
  });
  return {
    ListPools: admin(() => ({ pools: [...cp.state.pools.keys()].sort().map(pool) })),
    GetPool: admin((req: { name: string }) => pool(req.name)),
    ListNodes: admin((req: { pool: string }) => ({
      nodes: [...cp.state.nodes.values()]
        .filter((n) => !req.pool || n.pool === req.pool)
        .sort((a, b) => (a.name < b.name ? -1 : 1))
        .map(nodeToWire),
    })),
    GetNode: admin((req: { name: string }) => node(req.name)),
    // Interim, until replicas exist: the one process is the only replica and the leader.
    ListReplicas: admin(() => ({ replicas: [{ name: 'local', address: '', leader: true, lastHeartbeatUnixMs: Date.now(), version: VERSION, startedUnixMs: 0, agentsConnected: cp.sessions.size }] })),
    GetServerInfo: admin(() => ({ version: VERSION, replica: 'local', store: 'sqlite', leader: true })),
    Watch(call: ServerWritableStream<WatchRequest__Output, WatchEvent>) {
      try {
        auth.requireAdmin(call);
      } catch (err) {
        call.emit('error', toServiceError(err, log));
        return;
      }
      const wantPools = call.request.pools || !call.request.nodes;
      const wantNodes = call.request.nodes || !call.request.pools;
      const send = (notice: WatchNotice): void => {
        if (notice.kind === 'pool' && !wantPools) return;
        if (notice.kind === 'node' && !wantNodes) return;
        if (notice.type === 'DELETED') {
          call.write({ type: 'DELETED', [notice.kind]: { name: notice.name } });
          return;
        }
        if (notice.kind === 'pool' && cp.state.pools.has(notice.name)) call.write({ type: notice.type, pool: pool(notice.name) });
        if (notice.kind === 'node' && cp.state.nodes.has(notice.name)) call.write({ type: notice.type, node: node(notice.name) });
      };
      if (wantPools) for (const name of [...cp.state.pools.keys()].sort()) call.write({ type: 'ADDED', pool: pool(name) });
      if (wantNodes) for (const name of [...cp.state.nodes.keys()].sort()) call.write({ type: 'ADDED', node: node(name) });
      call.write({ type: 'SYNCED' });
      cp.hub.on('notice', send);
      const stop = (): void => {
        cp.hub.off('notice', send);
      };
      call.on('cancelled', stop);
      call.on('close', stop);
      call.on('error', stop);
    },
  };
}
