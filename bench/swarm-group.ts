// The simulated agents of bench/controlplane.ts, in one or more bench/agent-swarm.ts processes
// (BENCH_SWARMS). One process standing in for thousands of hosts spends up to a core on its own
// side of their TLS handshakes and reports; where the machine has cores to spare, more processes
// let the agents' side keep up, as separate hosts would. On the 2-core build machine a second
// process only took CPU from the replicas (docs/sizing.md), so one is the default. Agent i is
// the same agent (name, zone, first address) whatever the number of processes.

import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

type SwarmEvent = Record<string, unknown> & { event: string };

export interface SwarmGroup {
  readonly pids: number[];
  /** Resolves when every agent is registered: their number on each address. */
  connected: Promise<{ count: number; perAddress: number[] }>;
  /** Every agent waits for a config it does not have (the next fan-out). */
  arm(): Promise<void>;
  /** When (Unix ms) the last agent got the new config. */
  fanoutDone(): Promise<number>;
  /** Every agent sends one status report whose lastDisruption is `tag`; resolves once all are written. */
  report(tag: string): Promise<void>;
  /** Each re-registration after a broken stream, with the running total over all processes. */
  onReconnected(listener: (count: number, at: number) => void): () => void;
  /** Failed re-registration attempts so far, "address: reason" -> count, over all processes. */
  retries(): Promise<Record<string, number>>;
  exit(): void;
}

export function startSwarmGroup(addresses: string[], pkiDir: string, agents: number, processes: number): SwarmGroup {
  const children: ChildProcess[] = [];
  const listeners = new Set<(e: SwarmEvent, from: number) => void>();
  const per = Math.ceil(agents / processes);
  for (let k = 0; k * per < agents; k++) {
    const count = Math.min(per, agents - k * per);
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/agent-swarm.ts', addresses.join(','), pkiDir, String(count), String(k * per)], { stdio: ['pipe', 'pipe', 'inherit'] });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const e = JSON.parse(line) as SwarmEvent;
      for (const l of listeners) l(e, k);
    });
    children.push(child);
  }
  /** The event `name` from every process, in the order of the processes. */
  const fromAll = (name: string): Promise<SwarmEvent[]> => new Promise((resolve) => {
    const got = new Map<number, SwarmEvent>();
    const l = (e: SwarmEvent, from: number): void => {
      if (e.event !== name) return;
      got.set(from, e);
      if (got.size < children.length) return;
      listeners.delete(l);
      resolve(children.map((_, i) => got.get(i)!));
    };
    listeners.add(l);
  });
  const tell = (line: string): void => {
    for (const c of children) c.stdin!.write(`${line}\n`);
  };
  const connected = fromAll('connected').then((all) => ({
    count: all.reduce((sum, e) => sum + (e.count as number), 0),
    perAddress: addresses.map((_, i) => all.reduce((sum, e) => sum + (e.perAddress as number[])[i]!, 0)),
  }));
  let reconnected = 0;
  return {
    pids: children.map((c) => c.pid!),
    connected,
    async arm() {
      const armed = fromAll('armed');
      tell('arm');
      await armed;
    },
    async fanoutDone() {
      return Math.max(...(await fromAll('fanout-done')).map((e) => e.at as number));
    },
    async report(tag) {
      const reported = fromAll('reported');
      tell(`report ${tag}`);
      await reported;
    },
    onReconnected(listener) {
      const l = (e: SwarmEvent): void => {
        if (e.event === 'reconnected') listener(++reconnected, e.at as number);
      };
      listeners.add(l);
      return () => listeners.delete(l);
    },
    async retries() {
      const all = fromAll('retries');
      tell('retries');
      const merged: Record<string, number> = {};
      for (const e of await all) for (const [reason, n] of Object.entries(e.failed as Record<string, number>)) merged[reason] = (merged[reason] ?? 0) + n;
      return Object.fromEntries(Object.entries(merged).sort((a, b) => b[1] - a[1]));
    },
    exit() {
      tell('exit');
    },
  };
}
