// The control plane under N agents (BENCH_AGENTS, default 1,000; a list such as 1000,5000,10000
// runs each size and then prints how every figure grows; the goals are for 5,000) connected over
// real mutual TLS from a separate process, in both store modes:
//   sqlite  one mcplane-server on SQLite;
//   etcd    three replicas on a real three-member etcd, the agents spread over them.
// BENCH_STORE=sqlite|etcd runs one mode only.
//
// Printed per mode, with the goals of the distributed control plane issue:
//   Apply of one MachineConfig with 1,000 stored, p50 (< 25 ms), beside a dry-run Apply of the
//     same document (the baseline: parsing and validation without store or render);
//   fan-out of an Apply until every agent has its assignment (< 2 s);
//   idle CPU per replica with every agent connected (< 5 % of a core);
//   memory per connected agent (RSS growth / agents, <= 100 KiB);
//   ListNodes during the fan-out: a page of 500 p99 (< 50 ms) and all nodes p99 (< 250 ms),
//     beside the same calls on the idle server (the baseline), once on the main port and once on
//     each replica's --status-listen port (StatusService on a thread of its own);
//     BENCH_STATUS_THREAD=0 runs the replicas without it, to see what the thread costs;
//     etcd replicas hold 5 s leases, the default (BENCH_LEASE_TTL sets another);
//   etcd mode: leader failover time and how long the killed replica's agents took to re-register;
//   the control plane's CPU per unit of work (servers and etcd together): per registration, per
//     assignment sent, per status report stored, per ListNodes page of 500. With the simulator on
//     a CPU of its own (bench/cpu-pinning.ts) these hold across runs where wall clock does not:
//     compare these first, across runs and commits (`--compare REF`, bench/compare-builds.ts).

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { pkiInitCommand } from '../src/cli/commands/pki.ts';
import { call } from '../src/cli/client/call.ts';
import { connect, type Clients } from '../src/cli/client/connection.ts';
import { silenceIpServernameWarning } from '../src/runtime/process-warnings.ts';
import { startEtcdCluster, type EtcdCluster } from '../sandbox/etcd-cluster.ts';
import { startReplicaSet, type ReplicaSet } from '../test/helpers/replica-set.ts';
import { spawnServer, type ServerProcess } from '../test/helpers/server-process.ts';
import { buildBoth, comparisonDir, withServer } from './compare-builds.ts';
import { CPU_PLAN, pinControlPlane, pinSelf, pinSimulator } from './cpu-pinning.ts';
import { report, rssKiB } from './harness.ts';
import { leaveOffFlags, missingOnSomeSide, serverFlags, type ServerFlags } from './server-flags.ts';
import { timedRead, type StatusRead } from './status-reads.ts';
import { startSwarmGroup, type SwarmGroup } from './swarm-group.ts';

const AGENT_COUNTS = (process.env.BENCH_AGENTS ?? '1000').split(',').map(Number);

/** The figures compared across fleet sizes. */
interface Figures {
  applyP50?: number;
  fanoutMs?: number;
  perAgentKiB?: number;
  pageP99?: number;
  allP99?: number;
  statusPageP99?: number;
  statusAllP99?: number;
  reregisteredMs?: number;
  /** The control plane's CPU (servers and etcd) per unit of work, in microseconds. */
  cpuPerRegistrationUs?: number;
  cpuPerAssignmentUs?: number;
  cpuPerReportUs?: number;
  cpuPerPageUs?: number;
}
const STORED_CONFIGS = 1000;
/**
 * BENCH_FAILOVER_ONLY=1 (etcd): connect the agents, kill the leader, time the re-registration,
 * nothing else: a minute instead of six, for profiling it (NODE_OPTIONS=--cpu-prof reaches the
 * replicas and the swarm; the killed replica writes none).
 */
const FAILOVER_ONLY = process.env.BENCH_FAILOVER_ONLY === '1';
/**
 * The simulated agents' processes (bench/swarm-group.ts). One on two cores: a second took CPU
 * from the replicas (fan-out 9.5 s against 7.1 s on etcd) for a re-registration within noise.
 */
const SWARM_PROCESSES = Number(process.env.BENCH_SWARMS ?? 1);
const STATUS_THREAD = process.env.BENCH_STATUS_THREAD !== '0';
/** BENCH_LEASE_TTL=2 shows what the tests' short lease does under the same load. */
const BENCH_LEASE_TTL_SECONDS = Number(process.env.BENCH_LEASE_TTL ?? 5);
/**
 * How the servers of one run are started: with the status thread or not, and which flags to
 * leave off because one side of a comparison lacks them (bench/server-flags.ts), so that both
 * sides run the same set-up.
 */
interface ServerSetup {
  statusThread: boolean;
  leaveOff: string[];
  /** The flags known to take a value, to drop a left-off flag's value with it. */
  flags: ServerFlags;
}

/** The set-up for servers built from `sides` (one side when not comparing). */
function serverSetup(sides: readonly ServerFlags[]): ServerSetup {
  const leaveOff = missingOnSomeSide(sides);
  const flags = new Map(sides.flatMap((s) => [...s]));
  return { statusThread: STATUS_THREAD && flags.has('--status-listen') && !leaveOff.includes('--status-listen'), leaveOff, flags };
}
const MODES = (process.env.BENCH_STORE ? [process.env.BENCH_STORE] : ['sqlite', 'etcd']) as ('sqlite' | 'etcd')[];

export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks
}
const pct = (samples: number[], p: number): number => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};
const verdict = (ok: boolean): string => (ok ? 'MET' : 'NOT MET');
const mcText = (name: string, role: string, karg: string): string =>
  `apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: ${name}, labels: {machineconfiguration.openshift.io/role: ${role}}}\nspec: {kernelArguments: [${karg}]}\n`;

interface Deployment {
  leader?: () => Promise<number>;
  pids: () => number[];
  /** etcd's members, whose CPU is the control plane's too. */
  etcdPids: () => number[];
  addresses: string[];
  /** Each replica's --status-listen address. */
  statusAddresses: string[];
  admin(i: number): Clients;
  /** Kills the leader; resolves with the time until another replica leads. */
  failover?: () => Promise<{ killed: number; leaderMs: number }>;
  /** The log lines of the replicas still running. */
  logs?: () => string[];
  stop(): Promise<void>;
}

async function deploy(mode: 'sqlite' | 'etcd', dir: string, setup: ServerSetup): Promise<Deployment> {
  const pkiDir = join(dir, 'pki');
  const STATUS_LISTEN = setup.statusThread ? ['--status-listen', '127.0.0.1:0'] : [];
  const finalArgs = (args: string[]): string[] => leaveOffFlags(args, setup.leaveOff, setup.flags);
  if (mode === 'sqlite') {
    const server: ServerProcess = await spawnServer(finalArgs(['--data-dir', join(dir, 'data'), '--listen', '127.0.0.1:0', ...STATUS_LISTEN, '--pki-dir', pkiDir, '--no-bootstrap']));
    const c = connect({ server: server.address, pkiDir, config: '/dev/null', timeout: '60' });
    return {
      pids: () => [server.child.pid!],
      etcdPids: () => [],
      addresses: [server.address],
      statusAddresses: server.statusAddress ? [server.statusAddress] : [],
      admin: () => c,
      async stop() {
        c.close();
        server.child.kill('SIGTERM');
        await server.exited;
      },
    };
  }
  const etcd: EtcdCluster = await startEtcdCluster({ members: 3 });
  // The production lease (--lease-ttl's default, 5 s), not the tests' 2 s: under the storm of
  // re-registrations after a kill, a 2 s lease renewed from a busy event loop expired on the
  // survivors too, and they shed their own agents in turn (docs/sizing.md).
  const set: ReplicaSet = await startReplicaSet({ endpoints: etcd.endpoints, count: 3, pkiDir, args: STATUS_LISTEN, leaseTtlSeconds: BENCH_LEASE_TTL_SECONDS, finalArgs });
  return {
    pids: () => set.replicas.filter((r) => r.process).map((r) => r.process!.child.pid!),
    etcdPids: () => etcd.pids(),
    addresses: set.addresses,
    statusAddresses: set.replicas.flatMap((r) => (r.process?.statusAddress ? [r.process.statusAddress] : [])),
    admin: (i) => set.admin(i),
    leader: () => set.waitForLeader(15_000),
    logs: () => set.replicas.flatMap((r) => r.process?.logs ?? []),
    async failover() {
      const killed = await set.waitForLeader(15_000);
      const t0 = performance.now();
      await set.kill(killed);
      await set.waitForLeader(30_000, killed);
      return { killed, leaderMs: performance.now() - t0 };
    },
    async stop() {
      await set.stop();
      await etcd.stop();
    },
  };
}

/** A status reader in its own process (bench/read-poller.ts). */
function startReader(address: string, pkiDir: string, kind: StatusRead) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/read-poller.ts', address, pkiDir, kind], { stdio: ['pipe', 'pipe', 'inherit'] });
  pinSimulator([child.pid!]);
  const lines = createInterface({ input: child.stdout! });
  const next = (): Promise<string> => new Promise((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`read-poller ${kind} exited ${code}`)));
  });
  const ready = next();
  return {
    kind,
    ready,
    go: () => child.stdin!.write('go\n'),
    async stop(): Promise<number[]> {
      const samples = next();
      child.stdin!.write('stop\n');
      return JSON.parse(await samples) as number[];
    },
  };
}

async function currentLeader(d: Deployment): Promise<number> {
  return d.leader ? d.leader() : 0;
}

export async function runMode(mode: 'sqlite' | 'etcd', AGENTS: number, setup: ServerSetup = serverSetup([serverFlags()])): Promise<Figures> {
  const { statusThread } = setup;
  const dir = mkdtempSync(join(tmpdir(), `mcplane-bench-${mode}-`));
  await pkiInitCommand(join(dir, 'pki'), [], []);
  const d = await deploy(mode, dir, setup);
  pinControlPlane([...d.pids(), ...d.etcdPids()]);
  /** CPU seconds the control plane (servers and etcd) has used so far. */
  const controlPlaneCpu = (): number => [...d.pids(), ...d.etcdPids()].reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  const c = d.admin(0);
  const apply = (text: string, dryRun = false) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'bench.yaml', text }], dryRun }, 'apply');
  const pool = 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: worker}\nspec:\n  machineConfigSelector: {matchLabels: {machineconfiguration.openshift.io/role: worker}}\n  nodeSelector: {matchLabels: {node-role.kubernetes.io/worker: ""}}\n  maxUnavailable: 100%\n';
  await apply(pool + '---\n' + mcText('50-bench', 'worker', 'bench=0'));

  // Apply latency with 1,000 stored configs, all feeding the worker pool (the render it
  // triggers merges every one of them), before any agent connects.
  for (let i = 0; i < (FAILOVER_ONLY ? 0 : STORED_CONFIGS); i += 100) {
    const docs = Array.from({ length: 100 }, (_, j) => mcText(`60-stored-${String(i + j).padStart(4, '0')}`, 'worker', `stored${i + j}=1`));
    await apply(docs.join('---\n'));
  }
  const applyMs: number[] = [];
  const dryRunMs: number[] = [];
  for (let i = 0; i < (FAILOVER_ONLY ? 0 : 21); i++) {
    let t = performance.now();
    await apply(mcText('70-probe', 'worker', `probe=${i}`), true);
    dryRunMs.push(performance.now() - t);
    t = performance.now();
    await apply(mcText('70-probe', 'worker', `probe=${i}`));
    applyMs.push(performance.now() - t);
  }

  const rssBefore = d.pids().reduce((sum, pid) => sum + rssKiB(pid), 0);
  const connectStart = performance.now();
  const registrationCpu0 = controlPlaneCpu();
  const swarm = startSwarmGroup(d.addresses, join(dir, 'pki'), AGENTS, SWARM_PROCESSES);
  pinSimulator(swarm.pids);
  const connected = await swarm.connected;
  const connectSeconds = (performance.now() - connectStart) / 1000;
  for (;;) {
    const p = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
    if (p.status!.updatedMachineCount === AGENTS) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await settled(controlPlaneCpu);
  const cpuPerRegistrationUs = ((controlPlaneCpu() - registrationCpu0) / AGENTS) * 1e6;
  const rssAfter = d.pids().reduce((sum, pid) => sum + rssKiB(pid), 0);
  const perAgentKiB = (rssAfter - rssBefore) / AGENTS;
  if (FAILOVER_ONLY && d.failover) {
    const { rows, reregisteredMs } = await measureFailover(d, connected, swarm);
    swarm.exit();
    // SIGTERM first: a replica that exits by itself writes its --cpu-prof profile.
    for (const pid of d.pids()) process.kill(pid, 'SIGTERM');
    for (const pid of d.pids()) while (existsSync(`/proc/${pid}`)) await new Promise((r) => setTimeout(r, 100));
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
    report(`control plane (${mode}): ${AGENTS} agents, the leader killed (BENCH_FAILOVER_ONLY)`, [['agents connected in', `${connectSeconds.toFixed(1)} s`], ...rows]);
    return { reregisteredMs };
  }

  const idlePool: number[] = [];
  for (let i = 0; i < 20; i++) idlePool.push(await timedRead(c, 'pool'));
  const idleAll: number[] = [];
  const idlePage: number[] = [];
  for (let i = 0; i < 20; i++) {
    idleAll.push(await timedRead(c, 'all'));
    idlePage.push(await timedRead(c, 'page'));
  }

  // The CPU of ListNodes pages alone: the idle reads above were interleaved with whole lists.
  const PAGE_READS = 20;
  const pageCpu0 = controlPlaneCpu();
  for (let i = 0; i < PAGE_READS; i++) await timedRead(c, 'page');
  const cpuPerPageUs = ((controlPlaneCpu() - pageCpu0) / PAGE_READS) * 1e6;

  // One status report from every agent, each a change the server stores (its lastDisruption).
  const reportCpu0 = controlPlaneCpu();
  await swarm.report('bench-report');
  await settled(controlPlaneCpu);
  const cpuPerReportUs = ((controlPlaneCpu() - reportCpu0) / AGENTS) * 1e6;
  const sample = await call(c, c.status.getNode.bind(c.status), { name: 'bench-00000' }, 'get');
  if (sample.status?.lastDisruption !== 'bench-report') throw new Error(`bench-00000's report was not stored: lastDisruption is "${sample.status?.lastDisruption}"`);

  const idleWindow = 10;
  const cpu0 = d.pids().map(cpuSeconds);
  await new Promise((r) => setTimeout(r, idleWindow * 1000));
  const idleCpu = d.pids().map((pid, i) => (cpuSeconds(pid) - cpu0[i]!) / idleWindow);

  /** Applies a change to every agent's config; resolves with the ms until all have it. */
  const fanOut = async (value: number): Promise<number> => {
    await swarm.arm();
    const done = swarm.fanoutDone();
    const t0 = Date.now();
    await apply(mcText('50-bench', 'worker', `bench=${value}`));
    return (await done) - t0;
  };
  // The fan-out alone first: reads served during it take CPU from it, so it is timed apart.
  const fanoutCpu0 = controlPlaneCpu();
  const fanoutMs = await fanOut(1);
  // The Done reports the agents send back are the fan-out's work too: counted once they are in.
  await settled(controlPlaneCpu);
  const fanoutCpu = controlPlaneCpu() - fanoutCpu0;
  const cpuPerAssignmentUs = (fanoutCpu / AGENTS) * 1e6;

  // Then reads during a second fan-out: ListNodes and GetPool from paced loops on every replica,
  // started before the Apply and stopped when every agent has its assignment. Each reader runs
  // in a process of its own (bench/read-poller.ts), as each mcctl does: on one shared HTTP/2
  // connection a small answer waits behind a large one's frames, and in one process decoding a
  // large answer holds the loop every other read is timed on.
  const readsDuringFanOut = async (addresses: string[], value: number) => {
    const busy = { all: [] as number[], page: [] as number[], pool: [] as number[] };
    const readers = addresses.flatMap((address) => (['all', 'page', 'pool'] as const).map((kind) => startReader(address, join(dir, 'pki'), kind)));
    await Promise.all(readers.map((r) => r.ready));
    for (const r of readers) r.go();
    const ms = await fanOut(value);
    for (const r of readers) busy[r.kind].push(...(await r.stop()));
    return { ms, ...busy };
  };
  const onMain = await readsDuringFanOut(d.addresses, 2);
  // The same reads on the status threads' ports (--status-listen), during a third fan-out.
  const onStatus = statusThread ? await readsDuringFanOut(d.statusAddresses, 3) : undefined;
  const { all: busyAll, page: busyPage, pool: busyPool, ms: readFanoutMs } = onMain;

  const { rows: failoverRows, reregisteredMs } = d.failover ? await measureFailover(d, connected, swarm) : { rows: [], reregisteredMs: undefined };

  swarm.exit();
  await d.stop();
  rmSync(dir, { recursive: true, force: true });

  const replicas = mode === 'etcd' ? '3 replicas on a 3-member etcd' : 'one server on SQLite';
  const us = (n: number): string => `${n.toFixed(0)} µs`;
  report(`control plane (${mode}): ${AGENTS} agents over mutual TLS from a separate process, ${replicas}`, [
    ['CPUs', CPU_PLAN.description],
    ['control plane CPU per registration', `${us(cpuPerRegistrationUs)} (TLS handshake, register, first assignment and its report)`],
    ['control plane CPU per assignment sent', `${us(cpuPerAssignmentUs)} (its share of the render and commit, the send, and the Done report it brings back)`],
    ['control plane CPU per status report stored', us(cpuPerReportUs)],
    ['control plane CPU per ListNodes page of 500', us(cpuPerPageUs)],
    [`Apply one MachineConfig, ${STORED_CONFIGS} stored, p50`, `${pct(applyMs, 50).toFixed(1)} ms  (goal < 25 ms: ${verdict(pct(applyMs, 50) < 25)}); dry-run baseline ${pct(dryRunMs, 50).toFixed(1)} ms, ratio ${(pct(applyMs, 50) / pct(dryRunMs, 50)).toFixed(1)}x`],
    ['agents connected in', `${connectSeconds.toFixed(1)} s (certificate issuing included)`],
    ['fan-out (Apply to every agent assigned)', `${fanoutMs} ms  (goal < 2000 ms: ${verdict(fanoutMs < 2000)})`],
    ['CPU the control plane spent on that fan-out', `${fanoutCpu.toFixed(2)} s (all replicas)`],
    ['fan-out with the paced reads below served during it', `${readFanoutMs} ms`],
    ['CPU idle per replica, all connected', `${idleCpu.map((x) => `${(x * 100).toFixed(2)} %`).join(', ')} of a core  (goal < 5%: ${verdict(idleCpu.every((x) => x < 0.05))})`],
    ['memory per connected agent', `${perAgentKiB.toFixed(0)} KiB (RSS ${(rssBefore / 1024).toFixed(0)} -> ${(rssAfter / 1024).toFixed(0)} MiB over all replicas)  (goal <= 100 KiB: ${verdict(perAgentKiB <= 100)})`],
    ['ListNodes page of 500, idle p99 (baseline)', `${pct(idlePage, 99).toFixed(1)} ms`],
    [`ListNodes page of 500 during fan-out p99 (${busyPage.length} calls)`, `${pct(busyPage, 99).toFixed(1)} ms  (goal < 50 ms: ${verdict(pct(busyPage, 99) < 50)}), ${(pct(busyPage, 99) / pct(idlePage, 99)).toFixed(2)}x idle`],
    ['GetPool, idle p99 (baseline)', `${pct(idlePool, 99).toFixed(1)} ms`],
    [`GetPool during fan-out p99 (${busyPool.length} calls)`, `${pct(busyPool, 99).toFixed(1)} ms, ${(pct(busyPool, 99) / pct(idlePool, 99)).toFixed(2)}x idle`],
    [`ListNodes all ${AGENTS}, idle p99 (baseline)`, `${pct(idleAll, 99).toFixed(1)} ms`],
    [`ListNodes all during fan-out p99 (${busyAll.length} calls)`, `${pct(busyAll, 99).toFixed(1)} ms  (goal < 250 ms: ${verdict(pct(busyAll, 99) < 250)}), ${(pct(busyAll, 99) / pct(idleAll, 99)).toFixed(2)}x idle`],
    ...(onStatus ? [
      ['fan-out with the same reads served on --status-listen', `${onStatus.ms} ms`],
      [`  on --status-listen: ListNodes page of 500 p99 (${onStatus.page.length} calls)`, `${pct(onStatus.page, 99).toFixed(1)} ms  (goal < 50 ms: ${verdict(pct(onStatus.page, 99) < 50)}), ${(pct(onStatus.page, 99) / pct(idlePage, 99)).toFixed(2)}x idle on the main port`],
      [`  on --status-listen: GetPool p99 (${onStatus.pool.length} calls)`, `${pct(onStatus.pool, 99).toFixed(1)} ms, ${(pct(onStatus.pool, 99) / pct(idlePool, 99)).toFixed(2)}x idle on the main port`],
      [`  on --status-listen: ListNodes all p99 (${onStatus.all.length} calls)`, `${pct(onStatus.all, 99).toFixed(1)} ms  (goal < 250 ms: ${verdict(pct(onStatus.all, 99) < 250)}), ${(pct(onStatus.all, 99) / pct(idleAll, 99)).toFixed(2)}x idle on the main port`],
    ] as [string, string][] : []),
    ...failoverRows,
  ]);
  return { cpuPerRegistrationUs, cpuPerAssignmentUs, cpuPerReportUs, cpuPerPageUs, applyP50: pct(applyMs, 50), fanoutMs, perAgentKiB, pageP99: pct(busyPage, 99), allP99: pct(busyAll, 99), ...(onStatus ? { statusPageP99: pct(onStatus.page, 99), statusAllP99: pct(onStatus.all, 99) } : {}), ...(reregisteredMs !== undefined ? { reregisteredMs } : {}) };
}

/**
 * Resolves once the control plane has gone quiet: under 5 % of a core over half a second (the
 * idle cost of thousands of connected agents is about 1 %). Work the servers queue (group
 * commit, reports stored after the last send) is then counted in the figure that caused it.
 */
async function settled(cpu: () => number): Promise<void> {
  const deadline = performance.now() + 60_000;
  let before = cpu();
  while (performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
    const now = cpu();
    if (now - before < 0.025) return;
    before = now;
  }
}

/** Kills the leader; times the new leader and the re-registration of its agents elsewhere. */
async function measureFailover(d: Deployment, connected: { perAddress: number[] }, swarm: SwarmGroup): Promise<{ rows: [string, string][]; reregisteredMs: number }> {
  // Listen before the kill: agents re-register long before the new leader is known.
  const leader = await currentLeader(d);
  const backAt: number[] = [];
  const back = new Promise<number>((resolve) => {
    const off = swarm.onReconnected((count, at) => {
      backAt.push(at);
      if (count < connected.perAddress[leader]!) return;
      off();
      resolve(at);
    });
  });
  const cpu = (pids: number[]) => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  const survivors = d.pids().filter((_, i) => i !== leader);
  const cpu0 = { survivors: cpu(survivors), swarm: cpu(swarm.pids) };
  const killedAt = Date.now();
  const { killed, leaderMs } = await d.failover!();
  if (killed !== leader) throw new Error(`the leader changed from replica-${leader} to replica-${killed} before the kill`);
  const stranded = connected.perAddress[killed]!;
  const reconnectedAt = await back;
  // Whose CPU the storm took, from the kill to the last agent back.
  const cpuUsed = { survivors: cpu(survivors) - cpu0.survivors, swarm: cpu(swarm.pids) - cpu0.swarm };
  const failed = await swarm.retries();
  // A survivor that lost its own lease in the storm sheds its agents too (the cascade once seen).
  const leaseTrouble = (d.logs?.() ?? []).filter((line) => /etcd lease lost|lease keep-alive stream broke|replica lost its lease/.test(line));
  const firstTrouble = leaseTrouble[0] && /"msg":"([^"]+)"(?:.*"reason":"([^"]+)")?/.exec(leaseTrouble[0]);
  const failedTotal = Object.values(failed).reduce((a, b) => a + b, 0);
  const topReasons = Object.entries(failed).slice(0, 3).map(([reason, n]) => `${n}x ${reason}`).join('; ');
  const rows: [string, string][] = [
    ['leader failover (kill -9 to a new leader)', `${(leaderMs / 1000).toFixed(2)} s  (goal < 10 s: ${verdict(leaderMs < 10_000)})`],
    [`agents of the killed replica re-registered (${stranded})`, `${((reconnectedAt - killedAt) / 1000).toFixed(2)} s after the kill  (goal < 5 s: ${verdict(reconnectedAt - killedAt < 5000)})`],
    // Whether the time goes to throughput (even steps) or to stragglers (a long last step).
    ['  back after the kill: 10 / 25 / 50 / 75 / 90 %', [10, 25, 50, 75, 90].map((p) => `${((backAt[Math.max(0, Math.ceil((p / 100) * backAt.length) - 1)]! - killedAt) / 1000).toFixed(1)} s`).join(' / ')],
    // The simulated agents' own handshakes share the two cores: a swarm busier than the replicas
    // says the figure is the simulation's.
    ['  CPU from the kill to the last one back', `survivors ${cpuUsed.survivors.toFixed(1)} s, swarm ${cpuUsed.swarm.toFixed(1)} s (${SWARM_PROCESSES} processes)`],
    ['  failed re-registration attempts on the way', `${failedTotal}${topReasons ? `: ${topReasons}` : ''}`],
    ['  survivors\' lease trouble (lines logged)', `${leaseTrouble.length}${firstTrouble ? `, first: ${firstTrouble[1]}${firstTrouble[2] ? ` (${firstTrouble[2]})` : ''}` : ''}`],
  ];
  return { rows, reregisteredMs: reconnectedAt - killedAt };
}

/** Each figure at each fleet size, and its growth from the smallest. */
function reportGrowth(mode: string, sizes: number[], figures: Figures[]): void {
  const rows: [string, string][] = [];
  const row = (label: string, unit: string, pick: (f: Figures) => number | undefined): void => {
    const values = figures.map(pick);
    if (values.some((v) => v === undefined)) return;
    const first = values[0]!;
    rows.push([label, values.map((v, i) => `${sizes[i]}: ${v!.toFixed(unit === 'KiB' ? 0 : 1)} ${unit} (${(v! / first).toFixed(2)}x)`).join(',  ')]);
  };
  row('Apply with 1,000 stored, p50', 'ms', (f) => f.applyP50);
  row('fan-out', 'ms', (f) => f.fanoutMs);
  row('memory per agent', 'KiB', (f) => f.perAgentKiB);
  row('ListNodes page of 500 during fan-out, p99', 'ms', (f) => f.pageP99);
  row('ListNodes all during fan-out, p99', 'ms', (f) => f.allP99);
  row('ListNodes page of 500 during fan-out on --status-listen, p99', 'ms', (f) => f.statusPageP99);
  row('ListNodes all during fan-out on --status-listen, p99', 'ms', (f) => f.statusAllP99);
  row('killed replica\'s agents back', 'ms', (f) => f.reregisteredMs);
  row('CPU per registration', 'µs', (f) => f.cpuPerRegistrationUs);
  row('CPU per assignment sent', 'µs', (f) => f.cpuPerAssignmentUs);
  row('CPU per status report stored', 'µs', (f) => f.cpuPerReportUs);
  row('CPU per ListNodes page of 500', 'µs', (f) => f.cpuPerPageUs);
  report(`control plane (${mode}): growth from ${sizes[0]} to ${sizes.at(-1)} agents`, rows);
}

/** The figures of a comparison, in the order printed, with the unit each is in. */
const COMPARED: [string, keyof Figures, string][] = [
  ['CPU per registration', 'cpuPerRegistrationUs', 'µs'],
  ['CPU per assignment sent', 'cpuPerAssignmentUs', 'µs'],
  ['CPU per status report stored', 'cpuPerReportUs', 'µs'],
  ['CPU per ListNodes page of 500', 'cpuPerPageUs', 'µs'],
  ['fan-out (wall clock)', 'fanoutMs', 'ms'],
  ['Apply with 1,000 stored, p50', 'applyP50', 'ms'],
  ['memory per agent', 'perAgentKiB', 'KiB'],
  ['ListNodes page of 500 during fan-out, p99', 'pageP99', 'ms'],
  ["killed replica's agents back", 'reregisteredMs', 'ms'],
];

/** BENCH_COMPARE=REF (`--compare REF`): each mode and size on REF's server, then on this one's. */
async function compare(ref: string): Promise<void> {
  const work = comparisonDir();
  try {
    const builds = buildBoth(ref, work.dir);
    const sides = [builds.ref, builds.head];
    // A flag one side lacks is left off both: the two run the same set-up.
    const setup = serverSetup(await Promise.all(sides.map((b) => withServer(b, async () => serverFlags()))));
    const rounds = Number(process.env.BENCH_COMPARE_ROUNDS ?? 1);
    for (const mode of MODES) {
      for (const agents of AGENT_COUNTS) {
        const figures: Figures[][] = [[], []];
        for (let round = 0; round < rounds; round++) {
          for (const [i, build] of sides.entries()) figures[i]!.push(await withServer(build, () => runMode(mode, agents, setup)));
        }
        const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
        const rows: [string, string][] = [
          ['CPUs', CPU_PLAN.description],
          ['status thread', setup.statusThread ? 'on, both sides' : 'off, both sides (one side lacks --status-listen or BENCH_STATUS_THREAD=0)'],
          ['flags one side lacks, left off both', setup.leaveOff.join(' ') || 'none'],
        ];
        for (const [label, key, unit] of COMPARED) {
          const [a, b] = figures.map((f) => f.map((x) => x[key]).filter((v): v is number => v !== undefined));
          if (!a!.length || !b!.length) continue;
          const [ra, rb] = [median(a!), median(b!)];
          rows.push([label, `${ra.toFixed(unit === 'KiB' || unit === 'µs' ? 0 : 1)} -> ${rb.toFixed(unit === 'KiB' || unit === 'µs' ? 0 : 1)} ${unit}  ${(rb / ra).toFixed(2)}x`]);
        }
        report(`control plane (${mode}), ${agents} agents: ${builds.ref.label} (${builds.ref.commit}) -> ${builds.head.label}, median of ${rounds} round(s) each; below 1.00x is faster or smaller`, rows);
      }
    }
  } finally {
    work.remove();
  }
}

export async function run(): Promise<void> {
  silenceIpServernameWarning();
  pinSelf();
  if (process.env.BENCH_COMPARE) return compare(process.env.BENCH_COMPARE);
  for (const mode of MODES) {
    const figures: Figures[] = [];
    for (const agents of AGENT_COUNTS) figures.push(await runMode(mode, agents));
    if (AGENT_COUNTS.length > 1) reportGrowth(mode, AGENT_COUNTS, figures);
  }
}
