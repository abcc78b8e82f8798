// Control plane under N agents (BENCH_AGENTS, default 1,000; up to 5,000) connected over real
// mutual TLS from a separate process. Prints: fan-out time from an Apply that changes a pool with
// maxUnavailable 100% until every agent has its assignment; server RSS; server CPU while idle
// with every agent connected; ListNodes p50/p99 during the fan-out, beside ListNodes on an idle
// server (the baseline). Goals on 2 cores: 5,000 agents, fan-out < 2 s, idle CPU < 5% of a core.

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { pkiInitCommand } from '../src/cli/commands/pki.ts';
import { call } from '../src/cli/client/call.ts';
import { connect } from '../src/cli/client/connection.ts';
import { silenceIpServernameWarning } from '../src/runtime/process-warnings.ts';
import { spawnServer } from '../test/helpers/server-process.ts';
import { report } from './harness.ts';

const AGENTS = Number(process.env.BENCH_AGENTS ?? 1000);

function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks
}
function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
}
const pct = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

export async function run(): Promise<void> {
  silenceIpServernameWarning();
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-bench-'));
  await pkiInitCommand(join(dir, 'pki'), [], []);
  const server = await spawnServer(['--data-dir', join(dir, 'data'), '--listen', '127.0.0.1:0', '--pki-dir', join(dir, 'pki'), '--no-bootstrap']);
  const pid = server.child.pid!;
  const c = connect({ server: server.address, pkiDir: join(dir, 'pki'), config: '/dev/null', timeout: '60' });
  const mc = (value: string) => ({ source: 'bench.yaml', text: `apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 50-bench, labels: {machineconfiguration.openshift.io/role: worker}}\nspec: {kernelArguments: [bench=${value}]}\n` });
  const pool = { source: 'pool.yaml', text: 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: worker}\nspec:\n  machineConfigSelector: {matchLabels: {machineconfiguration.openshift.io/role: worker}}\n  nodeSelector: {matchLabels: {node-role.kubernetes.io/worker: ""}}\n  maxUnavailable: 100%\n' };
  await call(c, c.config.apply.bind(c.config), { manifests: [pool, mc('0')], dryRun: false }, 'apply');

  const listNodes = async (): Promise<number> => {
    const start = performance.now();
    await call(c, c.status.listNodes.bind(c.status), { pool: '' }, 'list nodes');
    return performance.now() - start;
  };

  const connectStart = performance.now();
  const swarm = spawn(process.execPath, ['--import', 'tsx', 'bench/agent-swarm.ts', server.address, join(dir, 'pki'), String(AGENTS)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const events = createInterface({ input: swarm.stdout! });
  const waitEvent = (name: string) => new Promise<Record<string, number>>((resolve) => {
    const onLine = (line: string): void => {
      const e = JSON.parse(line);
      if (e.event === name) {
        events.off('line', onLine);
        resolve(e);
      }
    };
    events.on('line', onLine);
  });
  await waitEvent('connected');
  const connectSeconds = (performance.now() - connectStart) / 1000;
  // Wait until the initial assignment has settled everywhere.
  for (;;) {
    const p = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
    if (p.status!.updatedMachineCount === AGENTS) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await new Promise((r) => setTimeout(r, 1000));

  // Baseline: ListNodes on the same server, same node count, nothing else happening.
  const idleLatencies: number[] = [];
  for (let i = 0; i < 20; i++) idleLatencies.push(await listNodes());
  idleLatencies.sort((a, b) => a - b);

  const idleWindow = 10;
  await new Promise((r) => setTimeout(r, 1000));
  const cpu0 = cpuSeconds(pid);
  await new Promise((r) => setTimeout(r, idleWindow * 1000));
  const idleCpu = (cpuSeconds(pid) - cpu0) / idleWindow;
  const rss = rssMiB(pid);

  swarm.stdin!.write('arm\n');
  await waitEvent('armed');
  const done = waitEvent('fanout-done');
  // ListNodes from four concurrent loops, started before the Apply and stopped when every
  // agent has its assignment, so they overlap the whole fan-out.
  const busyLatencies: number[] = [];
  let finished = false;
  void done.then(() => { finished = true; });
  const pollers = [0, 1, 2, 3].map(async () => {
    while (!finished) busyLatencies.push(await listNodes());
  });
  const t0 = Date.now();
  await call(c, c.config.apply.bind(c.config), { manifests: [mc('1')], dryRun: false }, 'apply');
  await done;
  await Promise.all(pollers);
  const fanoutMs = (await done).at! - t0;
  busyLatencies.sort((a, b) => a - b);
  const rssAfter = rssMiB(pid);

  swarm.stdin!.write('exit\n');
  c.close();
  server.child.kill('SIGTERM');
  await server.exited;

  report(`control plane: ${AGENTS} agents over mutual TLS from a separate process`, [
    ['agents connected in', `${connectSeconds.toFixed(1)} s (certificate issuing included)`],
    ['fan-out (Apply to every agent assigned)', `${fanoutMs} ms  (goal < 2000 ms: ${fanoutMs < 2000 ? 'MET' : 'NOT MET'})`],
    ['server CPU idle, all connected', `${(idleCpu * 100).toFixed(2)} % of a core  (goal < 5%: ${idleCpu < 0.05 ? 'MET' : 'NOT MET'})`],
    ['server RSS idle / after fan-out', `${rss.toFixed(0)} MiB / ${rssAfter.toFixed(0)} MiB`],
    ['ListNodes idle p50 / p99 (baseline)', `${pct(idleLatencies, 50).toFixed(1)} ms / ${pct(idleLatencies, 99).toFixed(1)} ms`],
    [`ListNodes during fan-out p50 / p99 (${busyLatencies.length} calls)`, `${pct(busyLatencies, 50).toFixed(1)} ms / ${pct(busyLatencies, 99).toFixed(1)} ms`],
    ['ListNodes p99 during fan-out / idle', `${(pct(busyLatencies, 99) / pct(idleLatencies, 99)).toFixed(2)}x`],
  ]);
}
