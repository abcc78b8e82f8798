// Several real mcplane-server processes on one etcd, each on a fixed loopback port so a killed
// replica comes back where its agents look for it. For failover tests and the etcd benchmark.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call } from '../../src/cli/client/call.ts';
import { connect, type Clients } from '../../src/cli/client/connection.ts';
import { freePort } from '../../sandbox/etcd-cluster.ts';
import { spawnServer, type ServerProcess } from './server-process.ts';

export interface ReplicaProcess {
  name: string;
  address: string;
  process: ServerProcess | undefined;
}

export interface ReplicaSet {
  replicas: ReplicaProcess[];
  addresses: string[];
  /** An admin client for replica i (made once, reused). */
  admin(i: number): Clients;
  /** SIGKILL replica i; resolves once it is gone. */
  kill(i: number): Promise<void>;
  /** Starts replica i again on its port. */
  restart(i: number): Promise<void>;
  /** The index of the replica that says it leads, or -1 when none does (asked of live ones). */
  leader(): Promise<number>;
  /** Polls until a live replica leads; returns its index. */
  waitForLeader(timeoutMs: number, except?: number): Promise<number>;
  stop(): Promise<void>;
}

export interface ReplicaSetOptions {
  endpoints: string[];
  count: number;
  pkiDir: string;
  /** Extra flags for every replica. */
  args?: string[];
  /**
   * Each replica's lease TTL (--lease-ttl), default 2 s: a killed or cut-off leader is replaced
   * after its lease runs out, and the production 5 s made every failover in the tests wait 5 s.
   * 2 s is about etcd's own minimum (1.5 s with its default timings).
   */
  leaseTtlSeconds?: number;
  /** Flags for one replica (e.g. a different --store for a replica behind a proxy). */
  argsFor?: (i: number) => string[] | undefined;
  /**
   * A last pass over each replica's full argument list: the bench's `--compare` leaves off the
   * flags an older commit's server lacks (61c6759 has no --lease-ttl; bench/server-flags.ts).
   */
  finalArgs?: (args: string[]) => string[];
}

export async function startReplicaSet(options: ReplicaSetOptions): Promise<ReplicaSet> {
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-replicas-'));
  const replicas: ReplicaProcess[] = [];
  for (let i = 0; i < options.count; i++) {
    replicas.push({ name: `replica-${i}`, address: `127.0.0.1:${await freePort()}`, process: undefined });
  }
  const clients = new Map<number, Clients>();
  const start = async (i: number): Promise<void> => {
    const r = replicas[i]!;
    const args = [
      ...(options.argsFor?.(i) ?? ['--store', `etcd://${options.endpoints.join(',')}`]),
      '--listen', r.address, '--replica-name', r.name, '--pki-dir', options.pkiDir, '--no-bootstrap',
      '--data-dir', join(dir, r.name), '--lease-ttl', String(options.leaseTtlSeconds ?? 2), ...(options.args ?? []),
    ];
    r.process = await spawnServer(options.finalArgs ? options.finalArgs(args) : args);
  };
  // One at a time: the first one elected is replica-0, which tests rely on.
  for (let i = 0; i < options.count; i++) await start(i);
  const admin = (i: number): Clients => {
    let c = clients.get(i);
    if (!c) {
      c = connect({ server: replicas[i]!.address, pkiDir: options.pkiDir, config: '/dev/null', timeout: '5' });
      clients.set(i, c);
    }
    return c;
  };
  const leader = async (): Promise<number> => {
    for (let i = 0; i < replicas.length; i++) {
      if (!replicas[i]!.process) continue;
      const c = admin(i);
      const info = await call(c, c.status.getServerInfo.bind(c.status), {}, 'server info').catch(() => undefined);
      if (info?.leader) return i;
    }
    return -1;
  };
  return {
    replicas,
    addresses: replicas.map((r) => r.address),
    admin,
    async kill(i) {
      const p = replicas[i]!.process;
      if (!p) return;
      replicas[i]!.process = undefined;
      p.child.kill('SIGKILL');
      await p.exited;
      clients.get(i)?.close();
      clients.delete(i);
    },
    restart: start,
    leader,
    async waitForLeader(timeoutMs, except) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const i = await leader();
        if (i >= 0 && i !== except) return i;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`no replica became leader within ${timeoutMs} ms`);
    },
    async stop() {
      for (const c of clients.values()) c.close();
      await Promise.all(replicas.map(async (r) => {
        if (!r.process) return;
        r.process.child.kill('SIGKILL');
        await r.process.exited;
        r.process = undefined;
      }));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
