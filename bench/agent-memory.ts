// Where a connected agent's memory goes on the server: one mcplane-server on SQLite, before and
// after N agents (BENCH_AGENTS, default 1,000) connect over real mutual TLS from a separate
// process and take a config. Printed per agent:
//   RSS growth (the goal: at most 100 KiB), split into V8's committed heap, what is in use in
//   it, Buffers and ArrayBuffers (Node's /metrics figures), and the native rest (OpenSSL's
//   per-connection state, nghttp2's sessions, libuv, malloc);
//   what is live after a full GC, by holder: each constructor's objects (grpc-js, Node's http2
//   and TLS objects, mcplane's own records), V8's strings, arrays, closures and code, and the
//   native memory Node reports into heap snapshots (nghttp2's). The snapshots come from a
//   second server: writing one leaves native memory resident that the RSS figure would count.
// The server runs with the Node settings its launcher ships (SERVER_NODE in scripts/package.ts);
// BENCH_SERVER_NODE=0 runs it with Node's defaults instead, BENCH_SNAPSHOTS=0 skips the second
// server (the RSS split alone, in half the time).

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { pkiInitCommand } from '../src/cli/commands/pki.ts';
import { call } from '../src/cli/client/call.ts';
import { connect } from '../src/cli/client/connection.ts';
import { spawnServer } from '../test/helpers/server-process.ts';
import { freePort } from '../sandbox/etcd-cluster.ts';
import { SERVER_NODE } from '../scripts/package.ts';
import { report, rssKiB } from './harness.ts';

const AGENTS = Number(process.env.BENCH_AGENTS ?? 1000);
const SERVER_FLAGS = process.env.BENCH_SERVER_NODE === '0' ? [] : SERVER_NODE.flags;
const SNAPSHOTS = process.env.BENCH_SNAPSHOTS !== '0';

/** Bytes of the snapshot's objects by what holds them: constructor name, or V8's kind of node. */
function heapByHolder(file: string): Map<string, number> {
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [number, number, number];
  const out = new Map<string, number>();
  const { nodes, strings } = snapshot;
  for (let i = 0; i < nodes.length; i += width) {
    const type = types[nodes[i + typeAt]!]!;
    // Objects by constructor; everything else by V8's kind (strings, arrays, closures, code...).
    const holder = type === 'object' || type === 'native' ? strings[nodes[i + nameAt]!]! : `(${type})`;
    out.set(holder, (out.get(holder) ?? 0) + nodes[i + sizeAt]!);
  }
  return out;
}

/** Node's own memory figures from the server's /metrics (prom-client's default metrics). */
async function nodeMemory(port: number): Promise<{ heapTotal: number; heapUsed: number; external: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^mcplane_server_${name}(?:{[^}]*})? (\\S+)`, 'm').exec(text)![1]);
  return { heapTotal: value('nodejs_heap_size_total_bytes'), heapUsed: value('nodejs_heap_size_used_bytes'), external: value('nodejs_external_memory_bytes') };
}

async function snapshot(pid: number, dir: string): Promise<Map<string, number>> {
  const before = new Set(readdirSync(dir));
  process.kill(pid, 'SIGUSR2');
  for (;;) {
    await sleep(500);
    const written = readdirSync(dir).find((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
    // Node writes the file from the server's main thread; it is complete once it parses.
    if (written) {
      for (;;) {
        try {
          return heapByHolder(join(dir, written));
        } catch {
          await sleep(500);
        }
      }
    }
  }
}

interface Measured {
  rss: [number, number];
  node: [Awaited<ReturnType<typeof nodeMemory>>, Awaited<ReturnType<typeof nodeMemory>>];
  heap?: [Map<string, number>, Map<string, number>];
}

/**
 * One server, before and after AGENTS agents connect and take a config. With `snapshots`, heap
 * snapshots at both points; without, none: writing one leaves native memory resident, which
 * would count as the agents' in the RSS figure, so RSS comes from a run without them.
 */
async function measure(snapshots: boolean): Promise<Measured> {
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-bench-memory-'));
  const pkiDir = join(dir, 'pki');
  await pkiInitCommand(pkiDir, [], []);
  const snapshotDir = join(dir, 'snapshots');
  mkdirSync(snapshotDir);
  const nodeOptions = process.env.NODE_OPTIONS;
  process.env.NODE_OPTIONS = [nodeOptions ?? '', ...SERVER_FLAGS, ...(snapshots ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshotDir}`] : [])].join(' ');
  const metricsPort = await freePort();
  const server = await spawnServer(['--data-dir', join(dir, 'data'), '--listen', '127.0.0.1:0', '--pki-dir', pkiDir, '--no-bootstrap', '--metrics-listen', `127.0.0.1:${metricsPort}`]);
  if (nodeOptions === undefined) delete process.env.NODE_OPTIONS;
  else process.env.NODE_OPTIONS = nodeOptions;
  const pid = server.child.pid!;
  const c = connect({ server: server.address, pkiDir, config: '/dev/null', timeout: '60' });
  const pool = 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: worker}\nspec:\n  machineConfigSelector: {matchLabels: {machineconfiguration.openshift.io/role: worker}}\n  nodeSelector: {matchLabels: {node-role.kubernetes.io/worker: ""}}\n  maxUnavailable: 100%\n';
  const mc = 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 50-bench, labels: {machineconfiguration.openshift.io/role: worker}}\nspec: {kernelArguments: [bench=1]}\n';
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'bench.yaml', text: pool + '---\n' + mc }], dryRun: false }, 'apply');
  try {
    await sleep(2000);
    const rss0 = rssKiB(pid);
    const node0 = await nodeMemory(metricsPort);
    const heap0 = snapshots ? await snapshot(pid, snapshotDir) : undefined;
    const swarm = spawn(process.execPath, ['--import', 'tsx', 'bench/agent-swarm.ts', server.address, pkiDir, String(AGENTS)], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: swarm.stdout! });
    await new Promise<void>((resolve) => lines.on('line', (l) => { if ((JSON.parse(l) as { event: string }).event === 'connected') resolve(); }));
    for (;;) {
      const p = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
      if (p.status!.updatedMachineCount === AGENTS) break;
      await sleep(200);
    }
    await sleep(2000);
    const rss1 = rssKiB(pid);
    const node1 = await nodeMemory(metricsPort);
    const heap1 = snapshots ? await snapshot(pid, snapshotDir) : undefined;
    swarm.kill();
    return { rss: [rss0, rss1], node: [node0, node1], ...(heap0 && heap1 ? { heap: [heap0, heap1] as [Map<string, number>, Map<string, number>] } : {}) };
  } finally {
    c.close();
    server.child.kill('SIGTERM');
    await server.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function run(): Promise<void> {
  const plain = await measure(false);
  const snapped = SNAPSHOTS ? await measure(true) : undefined;
  const [heap0, heap1] = snapped?.heap ?? [new Map<string, number>(), new Map<string, number>()];
  const growth = [...new Set([...heap0.keys(), ...heap1.keys()])]
    .map((holder) => ({ holder, bytes: (heap1.get(holder) ?? 0) - (heap0.get(holder) ?? 0) }))
    .sort((a, b) => b.bytes - a.bytes);
  const heapBytes = growth.reduce((sum, g) => sum + g.bytes, 0);
  const perAgent = (bytes: number) => `${(bytes / 1024 / AGENTS).toFixed(2)} KiB`;
  const [rss0, rss1] = plain.rss;
  const [node0, node1] = plain.node;
  const rssGrowth = (rss1 - rss0) * 1024;
  const committed = node1.heapTotal - node0.heapTotal;
  const external = node1.external - node0.external;
  report(`server memory per connected agent (${AGENTS} agents over mutual TLS, one server on SQLite, Node ${SERVER_FLAGS.join(' ') || 'defaults'})`, [
    ['RSS growth per agent', `${perAgent(rssGrowth)}  (goal <= 100 KiB: ${rssGrowth / 1024 / AGENTS <= 100 ? 'MET' : 'NOT MET'}; RSS ${Math.round(rss0 / 1024)} -> ${Math.round(rss1 / 1024)} MiB)`],
    ['  V8 heap, committed', perAgent(committed)],
    ['    in use (live and not yet collected)', perAgent(node1.heapUsed - node0.heapUsed)],
    ['  outside V8, known to Node (Buffers, ArrayBuffers)', perAgent(external)],
    ['  the rest (OpenSSL, nghttp2, libuv, malloc)', perAgent(rssGrowth - committed - external)],
    ...(SNAPSHOTS ? [['live after a full GC, by holder (second server, heap snapshots)', perAgent(heapBytes)] as [string, string]] : []),
    ...growth.slice(0, 25).map(({ holder, bytes }): [string, string] => [`  ${holder}`, perAgent(bytes)]),
  ]);
}
