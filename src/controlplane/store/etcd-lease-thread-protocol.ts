// What the main thread and the lease thread (etcd-lease-thread.ts, etcd-lease-thread-main.ts) say
// to each other. Renewal times do not travel as messages: each lease has a slot in shared memory
// that the thread writes and the main thread reads, so a main thread that was busy reads the
// latest renewal at once instead of the messages queued behind its other work.

/** workerData.role of the lease thread: the bundle runs as several programs by it. */
export const LEASE_THREAD_ROLE = 'mcplane-etcd-lease-thread';

export interface LeaseThreadData {
  role: typeof LEASE_THREAD_ROLE;
  endpoints: string[];
  tls?: { ca: Uint8Array; cert?: Uint8Array; key?: Uint8Array };
  deadlineMs: number;
  logLevel: string;
  /**
   * One BigInt64 the main thread sets to Date.now() a few times a second: a lease whose holder's
   * loop has not turned for longer than the thread tolerates is left to expire.
   */
  heartbeat: SharedArrayBuffer;
}

/** Main thread to lease thread. */
export type LeaseControl =
  /** `renewedAt`: one BigInt64, the send time (Unix ms) of the latest answered renewal. */
  | { t: 'keep'; id: string; ttlMs: number; renewedAt: SharedArrayBuffer }
  | { t: 'stop'; id: string };

/** Lease thread to main thread. */
export type LeaseReport =
  | { t: 'ready' }
  | { t: 'expired'; id: string; reason: string }
  | { t: 'log'; line: string };
