// The lease thread's program (etcd-lease-thread.ts starts it): the keep-alives of this process's
// etcd leases, over a connection of its own, on an event loop that does nothing else.
//
// From source this file is the worker's entry. In a bundle the worker runs the whole bundle
// (mcplane-server.cjs), whose main.ts imports this file: the check below starts the thread
// there, and main.ts runs the server only on the main thread.

import { isMainThread, parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { createLogger } from '../../runtime/logger.ts';
import { EtcdConnection } from './etcd-connection.ts';
import { EtcdLeaseKeepAlive } from './etcd-lease-keep-alive.ts';
import { LEASE_THREAD_ROLE, type LeaseControl, type LeaseReport, type LeaseThreadData } from './etcd-lease-thread-protocol.ts';

if (!isMainThread && (workerData as { role?: string } | undefined)?.role === LEASE_THREAD_ROLE) {
  runLeaseThread(workerData as LeaseThreadData, parentPort!);
}

/**
 * How many TTLs the holder's event loop may go without turning before its leases are left to
 * expire. A loop busy with thousands of handshakes still turns every few hundred milliseconds;
 * one that has not turned for this long is stuck, and its replica must not keep its agents and
 * its leadership by the thread's renewals alone.
 */
export const STALL_TTLS = 2;

function runLeaseThread(data: LeaseThreadData, parent: MessagePort): void {
  const report = (message: LeaseReport): void => parent.postMessage(message);
  const log = createLogger({ level: data.logLevel, write: (line) => report({ t: 'log', line }) });
  const tls = data.tls && { ca: Buffer.from(data.tls.ca), ...(data.tls.cert ? { cert: Buffer.from(data.tls.cert) } : {}), ...(data.tls.key ? { key: Buffer.from(data.tls.key) } : {}) };
  const connection = new EtcdConnection(data.endpoints, tls, data.deadlineMs);
  const heartbeat = new BigInt64Array(data.heartbeat);
  const kept = new Map<string, EtcdLeaseKeepAlive>();
  const told = new Set<string>();
  parent.on('message', (message: LeaseControl) => {
    if (message.t === 'stop') {
      kept.get(message.id)?.stop();
      kept.delete(message.id);
      told.delete(message.id);
      return;
    }
    const { id, ttlMs } = message;
    const renewedAt = new BigInt64Array(message.renewedAt);
    const mayRenew = (): boolean => {
      const stalledMs = Date.now() - Number(Atomics.load(heartbeat, 0));
      if (stalledMs <= STALL_TTLS * ttlMs) {
        told.delete(id);
        return true;
      }
      if (!told.has(id)) {
        told.add(id);
        log.error({ lease: id, stalledMs }, 'the replica\'s event loop has not turned for two lease TTLs: its lease is no longer renewed');
      }
      return false;
    };
    kept.set(id, new EtcdLeaseKeepAlive(connection, id, ttlMs, {
      renewed: (sentAt) => {
        // Answers come in order, but a stream moved to another member may answer late.
        if (BigInt(sentAt) > Atomics.load(renewedAt, 0)) Atomics.store(renewedAt, 0, BigInt(sentAt));
      },
      expired: (reason) => {
        kept.delete(id);
        report({ t: 'expired', id, reason });
      },
    }, log, mayRenew));
  });
  report({ t: 'ready' });
}
