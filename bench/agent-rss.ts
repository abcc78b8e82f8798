// The agent's memory, idle and connected: the bundled agent under each candidate V8/Node setting,
// beside the floor (Node + grpc-js holding one mTLS stream and nothing else), all measured in the
// same run against one control plane and one systemd user manager. Every process runs at once,
// so they share the machine's load, and each is read after the same idle time.
//
// RSS counts the pages of the node binary a process touched (shared between processes but
// counted in each one's RSS); "private" is its anonymous memory (heaps, stacks, malloc arenas).

import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AGENT_NODE as CHOSEN } from '../scripts/package.ts';
import { report } from './harness.ts';

/** `minified`: the bundle built again with esbuild's identifier minification (minifiedBundle). */
interface Variant { name: string; flags: string[]; env?: Record<string, string>; minified?: 'keepNames' | 'noNames' }

const VARIANTS: Variant[] = [
  { name: 'default', flags: [] },
  // The young generation: V8 grows each semi-space up to 16 MiB (32 with no pointer compression).
  { name: '--max-semi-space-size=1', flags: ['--max-semi-space-size=1'] },
  { name: '--max-semi-space-size=4', flags: ['--max-semi-space-size=4'] },
  // A limit, not a reservation: shows whether the old space holds garbage it could give back.
  { name: '--max-old-space-size=32', flags: ['--max-old-space-size=32'] },
  { name: '--optimize-for-size', flags: ['--optimize-for-size'] },
  // No optimizing compilers, lazy feedback vectors: less code and metadata on the heap.
  { name: '--lite-mode', flags: ['--lite-mode'] },
  // Lite mode plus no executable memory at all (no WebAssembly; the agent uses none).
  { name: '--jitless', flags: ['--jitless'] },
  { name: '--no-opt --no-maglev', flags: ['--no-opt', '--no-maglev'] },
  { name: '--max-lazy', flags: ['--max-lazy'] },
  // Fewer threads: V8's background workers (default 4) each with a stack and a malloc arena.
  { name: '--v8-pool-size=1', flags: ['--v8-pool-size=1'] },
  { name: '--single-threaded', flags: ['--single-threaded'] },
  // glibc gives each thread that mallocs its own arena (up to 8 per core) and keeps freed memory there.
  { name: 'MALLOC_ARENA_MAX=2', flags: [], env: { MALLOC_ARENA_MAX: '2' } },
  { name: '--memory-saver-mode', flags: ['--memory-saver-mode'] },
  { name: '--lite-mode --single-threaded', flags: ['--lite-mode', '--single-threaded'] },
  { name: '--lite-mode --optimize-for-size', flags: ['--lite-mode', '--optimize-for-size'] },
  { name: '--lite-mode --memory-saver-mode', flags: ['--lite-mode', '--memory-saver-mode'] },
  { name: '--jitless --single-threaded', flags: ['--jitless', '--single-threaded'] },
  { name: 'chosen: ' + [...CHOSEN.flags, ...Object.entries(CHOSEN.env).map(([k, v]) => `${k}=${v}`)].join(' '), flags: CHOSEN.flags, env: CHOSEN.env },
  { name: 'chosen + --jitless', flags: [...CHOSEN.flags, '--jitless'], env: CHOSEN.env },
  // The bundle's source stays on the heap (V8 compiles functions lazily from it): 2.1 MB as built.
  { name: 'chosen, bundle with minified identifiers (keepNames)', flags: CHOSEN.flags, env: CHOSEN.env, minified: 'keepNames' },
  { name: 'chosen, bundle fully minified (no keepNames)', flags: CHOSEN.flags, env: CHOSEN.env, minified: 'noNames' },
];

/**
 * The agent bundled as scripts/build.ts does, but with identifiers minified too (and, for
 * noNames, without keepNames' __name calls), beside the real one so that it finds the parsed
 * protos: what a smaller source would save. Not what ships: build.ts keeps names for stack traces.
 */
async function minifiedBundle(dir: string, kind: 'keepNames' | 'noNames'): Promise<string> {
  const { build } = await import('esbuild');
  const outfile = join(dir, `bench-agent-minified-${kind}.cjs`);
  await build({
    entryPoints: [join(import.meta.dirname, '../src/agent/main.ts')], outfile, bundle: true, platform: 'node', target: 'node24', format: 'cjs',
    minify: true, keepNames: kind === 'keepNames', legalComments: 'none', logLevel: 'warning',
    define: { 'import.meta.url': '__mcplaneImportMetaUrl', __MCPLANE_BUNDLED__: 'true', __MCPLANE_VERSION__: '"bench"' },
    banner: { js: "const __mcplaneImportMetaUrl = require('url').pathToFileURL(__filename).href;" },
  });
  return outfile;
}

/** RSS and private (anonymous) memory of a process, in MiB, from /proc. */
export function memoryOf(pid: number): { rss: number; anon: number } {
  const smaps = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (key: string): number => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(smaps)![1]) / 1024;
  return { rss: kb('Rss'), anon: kb('Anonymous') };
}

function findAgentPid(configPath: string): number {
  for (const pid of readdirSync('/proc').filter((p: string) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(configPath)) return Number(pid);
    } catch { /* gone */ }
  }
  throw new Error('agent process not found');
}

const mib = (n: number): string => `${n.toFixed(1)} MiB`;

export async function benchRss(): Promise<void> {
  const { startTestServer } = await import('../test/helpers/test-server.ts');
  const { SandboxHost } = await import('../sandbox/sandbox-host.ts');
  const { startUserSystemd } = await import('../sandbox/user-systemd.ts');
  const { buildBundles } = await import('../scripts/build.ts');
  const dist = await buildBundles();
  const bundle = join(dist, 'mcplane-agent.cjs');
  const minified = { keepNames: await minifiedBundle(dist, 'keepNames'), noNames: await minifiedBundle(dist, 'noNames') };
  const server = await startTestServer();
  const systemd = await startUserSystemd();
  const settle = Number(process.env.BENCH_RSS_SETTLE_SECONDS ?? 20);

  // The floor: Node 24 holding one idle AgentService stream over mutual TLS with grpc-js, and
  // nothing else. No agent on these building blocks can use less. Measured with the default
  // settings and with the chosen ones, which lower the floor too.
  const certs = await server.pki.node('bench-floor');
  const floorScript = `
    const grpc = require('@grpc/grpc-js'); const fs = require('fs'); const loader = require('@grpc/proto-loader');
    const pkg = grpc.loadPackageDefinition(loader.loadSync(['mcplane/v1/agent.proto'], { includeDirs: ['proto'], keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true }));
    const c = new pkg.mcplane.v1.AgentService(${JSON.stringify(server.address)}, grpc.credentials.createSsl(fs.readFileSync(${JSON.stringify(certs.ca)}), fs.readFileSync(${JSON.stringify(certs.key)}), fs.readFileSync(${JSON.stringify(certs.cert)})));
    const s = c.connect(); s.on('data', () => {}); s.on('error', () => {});
    s.write({ register: { nodeName: 'bench-floor', labels: {}, bootId: 'b', agentVersion: 'floor', status: { state: 'Done' } } });
    setInterval(() => {}, 60000);`;
  const floors: [string, ChildProcess][] = [
    // Node itself, running nothing: its code and data pages alone are most of any agent's RSS.
    ['bare Node, chosen: node -e \'setInterval(...)\'', spawn(process.execPath, [...CHOSEN.flags, '-e', 'setInterval(() => {}, 60000)'], { stdio: 'ignore', env: { ...process.env, ...CHOSEN.env } })],
    ['floor, default', spawn(process.execPath, ['-e', floorScript], { stdio: 'ignore' })],
    ['floor, chosen', spawn(process.execPath, [...CHOSEN.flags, '-e', floorScript], { stdio: 'ignore', env: { ...process.env, ...CHOSEN.env } })],
  ];

  // Drift and heartbeat at the shipped defaults (60 s, 30 s), as on an idle host.
  const hosts = VARIANTS.map((v, i) => new SandboxHost({
    name: `bench-rss-${i}`, server: server.address, pki: server.pki, systemd, driftIntervalSeconds: 60,
    config: { heartbeatSeconds: 30 }, agentCommand: [process.execPath, ...v.flags, v.minified ? minified[v.minified] : bundle],
  }));
  await Promise.all(hosts.map((h, i) => h.start(VARIANTS[i]!.env)));
  const deadline = Date.now() + 60_000;
  while (!hosts.every((h) => h.logs.some((l) => l.includes('connected to the control plane')))) {
    const dead = hosts.find((h) => h.logs.some((l) => l.startsWith('stderr: ') && /Error|error:/.test(l)));
    if (Date.now() > deadline || dead) throw new Error(`agent did not connect:\n${(dead ?? hosts.find((h) => !h.logs.some((l) => l.includes('connected'))))!.logs.join('\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  // Idle long enough for V8's memory reducer to run (it starts 8 s after allocation slows down).
  await new Promise((r) => setTimeout(r, settle * 1000));
  const agents = hosts.map((h) => memoryOf(findAgentPid(h.configPath)));
  const floor = floors.map(([name, child]) => [name, memoryOf(child.pid!)] as const);
  for (const [, child] of floors) child.kill();
  await Promise.all(hosts.map((h) => h.stop()));
  await systemd.stop();
  await server.close();

  const base = agents[0]!;
  const goal = (rss: number): string => (rss < 64 ? 'MET' : 'NOT MET');
  report(`rss: the bundled agent (dist/bundle/mcplane-agent.cjs on Node ${process.versions.node}), idle and connected ${settle} s, all at once`, [
    ...floor.map(([name, m]): [string, string] => [name.startsWith('floor') ? `${name}: Node + grpc-js, one mTLS stream, nothing else` : name, `RSS ${mib(m.rss)}, private ${mib(m.anon)}`]),
    ...VARIANTS.map((v, i): [string, string] => {
      const m = agents[i]!;
      return [`agent ${v.name}`, `RSS ${mib(m.rss)} (${(m.rss / base.rss).toFixed(2)}x), private ${mib(m.anon)} (${(m.anon / base.anon).toFixed(2)}x)`];
    }),
    ['agent above the floor (default settings)', `RSS +${mib(base.rss - floor[1]![1].rss)}, private +${mib(base.anon - floor[1]![1].anon)}`],
    ['goal: the shipped agent (the launcher\'s settings) RSS < 64 MiB', goal(agents[VARIANTS.findIndex((v) => v.name.startsWith('chosen:'))]!.rss)],
  ]);
}
