// What the replica's main thread and its status thread (status-thread.ts, status-thread-main.ts)
// say to each other. The store itself travels on a port of its own (store/store-relay.ts).

import type { MessagePort } from 'node:worker_threads';
import type { TlsFiles } from '../../runtime/tls.ts';
import type { Store } from '../store/store.ts';

/** workerData.role of the status thread: the bundle runs as several programs by it. */
export const STATUS_THREAD_ROLE = 'mcplane-status-thread';

export const STATUS_SERVICE = 'mcplane.v1.StatusService';

export interface StatusThreadData {
  role: typeof STATUS_THREAD_ROLE;
  listen: string;
  /** Absent: plaintext (--insecure, loopback only, checked by the main thread). */
  tls?: TlsFiles;
  certificateWatchMs: number;
  backend: Store['backend'];
  storePort: MessagePort;
  logLevel: string;
  replica: { name: string; address: string; leading: boolean; agentsConnected: number; watchBacklog: number };
}

/** Main thread to status thread. */
export type ThreadControl =
  | { t: 'replica'; leading: boolean; agentsConnected: number }
  | { t: 'serving'; serving: boolean }
  | { t: 'reload-tls' }
  | { t: 'shutdown'; graceMs: number };

/** Status thread to main thread. */
export type ThreadReport =
  | { t: 'ready'; port: number }
  | { t: 'failed'; message: string }
  | { t: 'log'; line: string }
  | { t: 'reloaded'; changed: boolean };
