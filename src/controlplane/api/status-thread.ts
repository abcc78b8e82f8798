// --status-listen: StatusService (mcctl get, describe and -w, the dashboard) on a port of its own,
// served by a worker thread with its own event loop and its own cache of the store. On the main
// port a read waits for whatever the replica's one loop is doing: a fan-out's sends, thousands of
// agents' reports, the controllers. On this one it waits only for other reads, and the thread
// runs on another core. The main port keeps serving StatusService too, for clients that do not
// know this one.
//
// What the thread sees of the replica comes from here: the store through a relay (one more
// watch; store/store-relay.ts), the replica's leadership, agent count and health each second and
// on change. Writes stay on the main thread: this thread serves reads only.

import { MessageChannel } from 'node:worker_threads';
import { ConfigurationError } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { TlsFiles } from '../../runtime/tls.ts';
import { relogThreadLine, startWorker } from '../../runtime/worker-thread.ts';
import { NODE_VIEW_KINDS } from '../store/kinds.ts';
import { relayStore } from '../store/store-relay.ts';
import type { Store, StoredKind } from '../store/store.ts';
import type { ServingReplica } from './api-access.ts';
import { STATUS_THREAD_ROLE, type StatusThreadData, type ThreadControl, type ThreadReport } from './status-thread-protocol.ts';

/**
 * What StatusService reads from the cache (status-service.ts): pools and their status, the
 * objects a node's view is made of, replicas, the leader, events. Rendered configs, sources and
 * credentials stay on the main thread: relaying them would cost memory and CPU for nothing.
 */
export const STATUS_KINDS: readonly StoredKind[] = ['MachineConfigPool', 'PoolStatus', 'Replica', 'Leader', 'Event', ...NODE_VIEW_KINDS];

/** How often the thread hears the replica's leadership and agent count (GetServerInfo, ListReplicas). */
const REPLICA_REFRESH_MS = 1000;

export interface StatusThreadOptions {
  listen: string;
  tls?: TlsFiles;
  certificateWatchMs: number;
  store: Store;
  replica: ServingReplica;
  logLevel: string;
  log: Logger;
}

export interface StatusThread {
  readonly port: number;
  /** Follows the main port's health: a replica cut off from the store serves reads on neither. */
  setServing(serving: boolean): void;
  /** Reads the TLS files again (SIGHUP), as the main port does. */
  reloadCertificates(): void;
  /** Ends Watch streams with a status that says why, finishes calls, stops the thread. */
  close(graceMs: number): Promise<void>;
}

export async function startStatusThread(options: StatusThreadOptions): Promise<StatusThread> {
  const { replica, log } = options;
  const threadLog = log.child({ thread: 'status' });
  const { port1, port2 } = new MessageChannel();
  const relay = relayStore(options.store, STATUS_KINDS, port1, (err) => threadLog.error({ err }, 'listing the store for the status thread failed'));
  const data: StatusThreadData = {
    role: STATUS_THREAD_ROLE,
    listen: options.listen,
    ...(options.tls ? { tls: options.tls } : {}),
    certificateWatchMs: options.certificateWatchMs,
    backend: options.store.backend,
    storePort: port2,
    logLevel: options.logLevel,
    replica: { name: replica.name, address: replica.address, leading: replica.leading, agentsConnected: replica.agentsConnected, watchBacklog: replica.watchBacklog },
  };
  const worker = startWorker(new URL('./status-thread-main.ts', import.meta.url), import.meta.url, { workerData: data, transferList: [port2], name: 'mcplane-status' });
  const control = (message: ThreadControl): void => worker.postMessage(message);
  worker.on('message', (message: ThreadReport) => {
    if (message.t === 'log') relogThreadLine(threadLog, message.line);
  });
  let closing = false;
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    const onMessage = (message: ThreadReport): void => {
      if (message.t === 'ready') resolve(message.port);
      if (message.t === 'failed') reject(new ConfigurationError(`--status-listen ${options.listen}: ${message.message}`));
    };
    worker.on('message', onMessage);
    worker.once('error', reject);
    void exited.then(() => reject(new Error('the status thread exited while starting')));
  }).catch(async (err: unknown) => {
    relay.stop();
    await worker.terminate();
    throw err;
  });
  worker.on('error', (err) => threadLog.error({ err }, 'the status thread failed'));
  void exited.then(() => {
    relay.stop();
    clearInterval(refresh);
    // Reads still work on the main port; this says why the status port stopped answering.
    if (!closing) threadLog.error({ listen: options.listen }, 'the status thread stopped: --status-listen serves no more reads until the server restarts');
  });
  const refresh = setInterval(() => control({ t: 'replica', leading: replica.leading, agentsConnected: replica.agentsConnected }), REPLICA_REFRESH_MS);
  refresh.unref();
  return {
    port,
    setServing(serving) {
      control({ t: 'replica', leading: replica.leading, agentsConnected: replica.agentsConnected });
      control({ t: 'serving', serving });
    },
    reloadCertificates() {
      control({ t: 'reload-tls' });
    },
    async close(graceMs) {
      if (!closing) {
        closing = true;
        control({ t: 'shutdown', graceMs });
        // A thread that does not end by itself is stopped: shutdown must not hang on it.
        const force = setTimeout(() => void worker.terminate(), graceMs + 2000);
        await exited;
        clearTimeout(force);
      }
      await exited;
    },
  };
}
