// The status reads the control-plane bench times, shared by bench/controlplane.ts (the idle
// baselines) and bench/read-poller.ts (the same reads during a fan-out, in their own processes).

import { performance } from 'node:perf_hooks';
import { call } from '../src/cli/client/call.ts';
import type { Clients } from '../src/cli/client/connection.ts';

/**
 * all: ListNodes of every node; page: ListNodes of 500; pool: GetPool, the smallest read (what
 * `mcctl get pools` asks), which shows how long a call waits for the loop apart from the time a
 * large answer takes to cross (HTTP/2 flow control) while the loop is busy.
 */
export type StatusRead = 'all' | 'page' | 'pool';

/** Milliseconds one read took, start to answer. */
export async function timedRead(c: Clients, read: StatusRead): Promise<number> {
  const t = performance.now();
  if (read === 'pool') await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool');
  else await call(c, c.status.listNodes.bind(c.status), { pool: '', limit: read === 'page' ? 500 : 0, continueToken: '' }, 'list nodes');
  return performance.now() - t;
}
