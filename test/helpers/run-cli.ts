import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { scaled } from './time-scale.ts';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

const SOURCES = { mcctl: 'src/cli/main.ts', 'mcplane-server': 'src/controlplane/main.ts', 'mcplane-agent': 'src/agent/main.ts' } as const;

/**
 * Node's arguments to start one of the programs: from source through tsx, or, when
 * MCPLANE_TEST_BUNDLES=1, the esbuild bundles that npm pack and the RPMs ship (scripts/test.sh
 * builds them, then copies them to dist/test-bundle, where no test rebuilds them). A process
 * started through tsx spends about 2 s of CPU resolving and transforming modules before it runs
 * (a bundle: 0.35 s), and the suite starts hundreds of them.
 */
export function programArgs(program: keyof typeof SOURCES): string[] {
  // A benchmark comparing commits runs another commit's bundle (bench/compare-builds.ts).
  const other = process.env[`MCPLANE_PROGRAM_${program.toUpperCase().replaceAll('-', '_')}`];
  if (other) return [other];
  return process.env.MCPLANE_TEST_BUNDLES === '1' ? [`dist/test-bundle/${program}.cjs`] : ['--import', 'tsx', SOURCES[program]];
}

/**
 * The path of a program's esbuild bundle, for tests of the bundle itself: the suite's copy when
 * scripts/test.sh built one (MCPLANE_TEST_BUNDLES=1), else a fresh `npm run build`.
 */
export function bundlePath(program: keyof typeof SOURCES): string {
  if (process.env.MCPLANE_TEST_BUNDLES === '1') return `dist/test-bundle/${program}.cjs`;
  const built = spawnSync('npm', ['run', 'build'], { cwd: REPO_ROOT, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`npm run build failed: ${built.stderr}`);
  return `dist/bundle/${program}.cjs`;
}

/**
 * The version a started program reports: a bundle carries package.json's (as the RPMs do), a
 * program run from source says it is a development build.
 */
export function programVersion(sourceVersion: string): string {
  if (process.env.MCPLANE_TEST_BUNDLES !== '1') return sourceVersion;
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs mcctl from source as a separate process, the way a user runs it. */
export function runCli(args: string[], options: { input?: string; env?: NodeJS.ProcessEnv } = {}): CliResult {
  const result = spawnSync(process.execPath, [...programArgs('mcctl'), ...args], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    input: options.input,
    env: { ...process.env, ...options.env },
    timeout: scaled(60_000),
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** runCli without blocking this process, for CLIs talking to a server in this process. */
export function runCliAsync(args: string[], options: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> {
  return runAsync(process.execPath, [...programArgs('mcctl'), ...args], { cwd: REPO_ROOT, env: { ...process.env, ...options.env }, input: options.input ?? '' });
}

/** Any program run to its end, its output collected; `input`, when given, is its stdin. */
export function runAsync(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => { stdout += d; });
    child.stderr!.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    if (options.input !== undefined) child.stdin!.end(options.input);
  });
}
