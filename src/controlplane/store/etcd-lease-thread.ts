// The keep-alives of this process's etcd leases run on a worker thread with its own connection
// to etcd (etcd-lease-thread-main.ts). From the main thread they were queued behind everything
// its event loop carries: after a replica was killed at 5,000 agents, the survivors' loops were
// so busy with the re-registrations that their 2 s leases expired, and they shed their own
// agents in turn (docs/sizing.md). The thread renews on time however busy the main loop is; it
// stops renewing only when that loop has not turned at all for two TTLs (STALL_TTLS), so a
// stuck replica still loses its lease and its agents go elsewhere.

import type { Worker } from 'node:worker_threads';
import { StoreUnavailableError } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import { relogThreadLine, startWorker } from '../../runtime/worker-thread.ts';
import type { EtcdTls } from './etcd-connection.ts';
import { LEASE_THREAD_ROLE, type LeaseControl, type LeaseReport, type LeaseThreadData } from './etcd-lease-thread-protocol.ts';

/** How often the main thread says its loop turned. */
const HEARTBEAT_MS = 100;

/** One lease's renewals as the main thread sees them. */
export interface KeptLease {
  /** The send time of the latest renewal etcd answered (Unix ms), or the grant's. */
  lastRenewedAt(): number;
  /** Stops the renewals (the lease then expires in etcd unless revoked). */
  stop(): void;
}

export interface LeaseThreadOptions {
  endpoints: readonly string[];
  tls: EtcdTls | undefined;
  deadlineMs: number;
  log: Logger;
}

export class EtcdLeaseThread {
  readonly #worker: Worker;
  readonly #heartbeat = new BigInt64Array(new SharedArrayBuffer(8));
  readonly #beat: NodeJS.Timeout;
  readonly #expired = new Map<string, (reason: string) => void>();
  #exited = false;
  #closing = false;

  /** Starts the thread and waits until it can take leases. */
  static async start(options: LeaseThreadOptions): Promise<EtcdLeaseThread> {
    const thread = new EtcdLeaseThread(options);
    await thread.#ready;
    return thread;
  }

  readonly #ready: Promise<void>;

  private constructor(options: LeaseThreadOptions) {
    const log = options.log.child({ thread: 'etcd-lease' });
    this.#beat = setInterval(() => Atomics.store(this.#heartbeat, 0, BigInt(Date.now())), HEARTBEAT_MS);
    this.#beat.unref();
    Atomics.store(this.#heartbeat, 0, BigInt(Date.now()));
    const tls = options.tls && { ca: options.tls.ca, ...(options.tls.cert ? { cert: options.tls.cert } : {}), ...(options.tls.key ? { key: options.tls.key } : {}) };
    const data: LeaseThreadData = {
      role: LEASE_THREAD_ROLE,
      endpoints: [...options.endpoints],
      ...(tls ? { tls } : {}),
      deadlineMs: options.deadlineMs,
      logLevel: log.level,
      heartbeat: this.#heartbeat.buffer as SharedArrayBuffer,
    };
    this.#worker = startWorker(new URL('./etcd-lease-thread-main.ts', import.meta.url), import.meta.url, { workerData: data, name: 'mcplane-etcd-lease' });
    // The thread never keeps the process alive: a server that is done exits, leases or not.
    this.#worker.unref();
    this.#ready = new Promise<void>((resolve, reject) => {
      this.#worker.on('message', (message: LeaseReport) => {
        if (message.t === 'ready') resolve();
        else if (message.t === 'log') relogThreadLine(log, message.line);
        else if (message.t === 'expired') {
          const listener = this.#expired.get(message.id);
          this.#expired.delete(message.id);
          listener?.(message.reason);
        }
      });
      this.#worker.once('error', (err) => {
        log.error({ err }, 'the etcd lease thread failed: its leases are no longer renewed');
        reject(new StoreUnavailableError(`the etcd lease thread failed to start: ${err.message}`, { cause: err }));
      });
      this.#worker.once('exit', (code) => {
        this.#exited = true;
        clearInterval(this.#beat);
        if (!this.#closing) log.error({ code }, 'the etcd lease thread stopped: the leases it kept will be lost, and new ones start another thread');
        reject(new StoreUnavailableError('the etcd lease thread exited while starting'));
      });
    });
    // Rejections after start are told through the listeners above; this one is awaited in start.
    this.#ready.catch(() => {});
  }

  /** False once the thread has ended (closed, or failed): the store starts another for new leases. */
  get running(): boolean {
    return !this.#exited;
  }

  /** Renews lease `id` from the thread from now on; `onExpired` when etcd says it is gone. */
  keep(id: string, ttlMs: number, grantedAt: number, onExpired: (reason: string) => void): KeptLease {
    const renewedAt = new BigInt64Array(new SharedArrayBuffer(8));
    Atomics.store(renewedAt, 0, BigInt(grantedAt));
    this.#expired.set(id, onExpired);
    this.#control({ t: 'keep', id, ttlMs, renewedAt: renewedAt.buffer as SharedArrayBuffer });
    return {
      lastRenewedAt: () => Number(Atomics.load(renewedAt, 0)),
      stop: () => {
        this.#expired.delete(id);
        this.#control({ t: 'stop', id });
      },
    };
  }

  async close(): Promise<void> {
    this.#closing = true;
    clearInterval(this.#beat);
    if (!this.#exited) await this.#worker.terminate();
  }

  #control(message: LeaseControl): void {
    if (!this.#exited) this.#worker.postMessage(message);
  }
}
