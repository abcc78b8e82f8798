// `npm run bench -- controlplane --compare REF`: the same sizes against another commit's server
// on the same machine in the same run, so a change that costs 1.5x shows as 1.5x and not as
// the noise between two runs on a shared machine. Both sides run as esbuild bundles (what ships):
// REF's built from a detached worktree of REF with this checkout's node_modules, this checkout's
// from its working tree. The simulator, the readers and the bench itself are this checkout's
// for both, so only the server differs. The sides alternate (REF, this, REF, this, ...) so that
// a machine getting busier hits both alike.

import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../test/helpers/run-cli.ts';

export interface Build {
  /** What the report calls it: the ref as given, or "this checkout". */
  label: string;
  /** The commit, or "working tree". */
  commit: string;
  serverBundle: string;
}

function run(command: string, args: string[], cwd: string): string {
  const r = spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, PATH: `${join(REPO_ROOT, 'node_modules/.bin')}:${process.env.PATH}` } });
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')} (in ${cwd}) failed: ${(r.stderr || r.stdout).trim().split('\n').slice(-5).join('\n')}`);
  return r.stdout.trim();
}

/** Builds this checkout's bundles and REF's, each copied to a directory of its own under `dir`. */
export function buildBoth(ref: string, dir: string): { ref: Build; head: Build } {
  const commit = run('git', ['rev-parse', '--verify', `${ref}^{commit}`], REPO_ROOT);
  run('npm', ['run', '-s', 'build'], REPO_ROOT);
  cpSync(join(REPO_ROOT, 'dist/bundle'), join(dir, 'head'), { recursive: true });
  const tree = join(dir, 'ref-source');
  run('git', ['worktree', 'add', '--detach', tree, commit], REPO_ROOT);
  try {
    symlinkSync(join(REPO_ROOT, 'node_modules'), join(tree, 'node_modules'));
    // Older commits generate their protobuf types before they typecheck or build.
    spawnSync('npm', ['run', '-s', 'proto:types'], { cwd: tree });
    run('npm', ['run', '-s', 'build'], tree);
    cpSync(join(tree, 'dist/bundle'), join(dir, 'ref'), { recursive: true });
  } finally {
    run('git', ['worktree', 'remove', '--force', tree], REPO_ROOT);
  }
  return {
    ref: { label: ref, commit: commit.slice(0, 12), serverBundle: join(dir, 'ref', 'mcplane-server.cjs') },
    head: { label: 'this checkout', commit: 'working tree', serverBundle: join(dir, 'head', 'mcplane-server.cjs') },
  };
}

/** Runs `fn` with the servers the bench starts taken from `build`. */
export async function withServer<T>(build: Build, fn: () => Promise<T>): Promise<T> {
  const before = process.env.MCPLANE_PROGRAM_MCPLANE_SERVER;
  process.env.MCPLANE_PROGRAM_MCPLANE_SERVER = build.serverBundle;
  try {
    return await fn();
  } finally {
    if (before === undefined) delete process.env.MCPLANE_PROGRAM_MCPLANE_SERVER;
    else process.env.MCPLANE_PROGRAM_MCPLANE_SERVER = before;
  }
}

export function comparisonDir(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-bench-compare-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
