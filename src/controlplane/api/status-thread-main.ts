// The status thread's program (status-thread.ts starts it): StatusService on a port of its own,
// answered from a cache of its own fed by the replica's store over a relay. Its event loop holds
// no agent stream and no controller, so a read waits only for other reads.
//
// From source this file is the worker's entry. In a bundle the worker runs the whole bundle
// (mcplane-server.cjs), whose main.ts imports this file: the check below starts the thread
// there, and main.ts runs the server only on the main thread.

import { EventEmitter } from 'node:events';
import { isMainThread, parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { createLogger, type Logger } from '../../runtime/logger.ts';
import { acceptingPreEncoded } from '../../runtime/pre-encoded.ts';
import { loadMcplaneProto } from '../../runtime/proto.ts';
import { ReloadingTls, serverCredentials } from '../../runtime/tls.ts';
import { ClusterCache } from '../cache/cluster-cache.ts';
import { CACHED_KINDS } from '../store/kinds.ts';
import { RelayedStore } from '../store/relayed-store.ts';
import { createAuthorizer } from './authorization.ts';
import { STATUS_RULES } from './access-rules.ts';
import { guarded } from './guarded-service.ts';
import { bindGrpcServer, shutdownGracefully } from './grpc-server.ts';
import { statusService } from './status-service.ts';
import { STATUS_SERVICE, STATUS_THREAD_ROLE, type StatusThreadData, type ThreadControl, type ThreadReport } from './status-thread-protocol.ts';

if (!isMainThread && (workerData as { role?: string } | undefined)?.role === STATUS_THREAD_ROLE) {
  void runStatusThread(workerData as StatusThreadData, parentPort!);
}

async function runStatusThread(data: StatusThreadData, parent: MessagePort): Promise<void> {
  const report = (message: ThreadReport): void => parent.postMessage(message);
  // Lines go to the main thread, which logs them with its own logger (journal, terminal or a
  // test's collector), marked thread=status.
  const log: Logger = createLogger({ level: data.logLevel, write: (line) => report({ t: 'log', line }) });
  const replica = {
    name: data.replica.name,
    address: data.replica.address,
    leading: data.replica.leading,
    agentsConnected: data.replica.agentsConnected,
    watchBacklog: data.replica.watchBacklog,
    lifecycle: new EventEmitter<{ shutdown: [] }>(),
  };
  const store = new RelayedStore(data.backend, data.storePort);
  let tls: ReloadingTls | undefined;
  let bound: Awaited<ReturnType<typeof bindGrpcServer>> | undefined;
  let cache: ClusterCache;
  try {
    tls = data.tls ? new ReloadingTls(data.tls, 'status TLS', (message) => log.error(message)) : undefined;
    bound = await bindGrpcServer(data.listen, tls ? tls.serverCredentials() : serverCredentials(undefined), [STATUS_SERVICE]);
    cache = await ClusterCache.start(store, log);
  } catch (err) {
    report({ t: 'failed', message: err instanceof Error ? err.message : String(err) });
    bound?.server.forceShutdown();
    tls?.close();
    await store.close();
    return;
  }
  const { server, health } = bound;
  const { grpc } = loadMcplaneProto();
  // Reads only: the same rules as the main port's, and nothing to audit.
  const guard = { auth: createAuthorizer(tls !== undefined), cache, audit: undefined, log };
  server.addService(acceptingPreEncoded(grpc.mcplane.v1.StatusService.service), guarded('StatusService', statusService({ cache, store }, replica, log), STATUS_RULES, guard));
  // NOT_SERVING until the main thread says otherwise (status-thread.ts, right after the start).
  let serving = false;
  const setHealth = (): void => {
    for (const s of ['', STATUS_SERVICE]) health.setStatus(s, serving ? 'SERVING' : 'NOT_SERVING');
  };
  tls?.watch(data.certificateWatchMs);
  const reloading = tls;

  parent.on('message', (message: ThreadControl) => {
    switch (message.t) {
      case 'replica':
        replica.leading = message.leading;
        replica.agentsConnected = message.agentsConnected;
        return;
      case 'serving':
        serving = message.serving;
        setHealth();
        return;
      case 'reload-tls':
        report({ t: 'reloaded', changed: reloading?.reload() ?? false });
        return;
      case 'shutdown':
        serving = false;
        setHealth();
        // Watch streams end with a status that says why, as on the main port.
        replica.lifecycle.emit('shutdown');
        void shutdownGracefully(server, message.graceMs).then(async () => {
          cache.stop();
          reloading?.close();
          await store.close();
          data.storePort.close();
          parent.close();
        });
        return;
    }
  });
  report({ t: 'ready', port: bound.port });
}
