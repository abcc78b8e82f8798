// The bin entries package.json declares: from a checkout (TypeScript source through tsx) and
// from an npm install of the packed tarball (esbuild bundles only, no dev dependencies), each
// talking to a real server over TLS.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { REPO_ROOT } from '../helpers/run-cli.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { scaled } from '../helpers/time-scale.ts';

let server: TestServer;
let conn: string[];
before(async () => {
  server = await startTestServer();
  conn = ['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null'];
});
after(async () => { await server.close(); });

// Node 24 first on PATH, as `npm run` arranges, so the launchers' `#!/usr/bin/env node` finds it.
const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}` };
const run = (cmd: string, args: string[], cwd = REPO_ROOT) => spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: scaled(120_000) });

test('package.json declares mcctl, mcplane-server and mcplane-agent as executable launchers', () => {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'));
  assert.deepEqual(Object.keys(pkg.bin).sort(), ['mcctl', 'mcplane-agent', 'mcplane-server']);
  for (const file of Object.values<string>(pkg.bin)) {
    assert.match(readFileSync(join(REPO_ROOT, file), 'utf8'), /^#!\/usr\/bin\/env node\n/);
  }
});

test('from a checkout, bin/mcctl.mjs runs the source against a real server', async () => {
  // Synchronous spawns would block this process's server: run the launcher asynchronously.
  const { spawn } = await import('node:child_process');
  const child = spawn(join(REPO_ROOT, 'bin', 'mcctl.mjs'), [...conn, 'version'], { cwd: tmpdir(), env });
  let stdout = '';
  child.stdout.on('data', (d) => { stdout += d; });
  const code = await new Promise((r) => child.once('exit', r));
  assert.equal(code, 0);
  assert.match(stdout, /^client: 0\.1\.0-dev\nserver: 0\.1\.0-dev \(at 127\.0\.0\.1:\d+, replica 127\.0\.0\.1:\d+, leader, store (sqlite|etcd)\)\n$/);
});

test('from an npm install of the packed tarball, the launchers run the bundles', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-npm-'));
  const packed = run('npm', ['pack', '--pack-destination', dir]); // prepack runs npm run build
  assert.equal(packed.status, 0, packed.stderr);
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
  const prefix = join(dir, 'prefix');
  const installed = run('npm', ['install', '-g', join(dir, tarball), '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund']);
  assert.equal(installed.status, 0, installed.stderr);
  const pkgDir = join(prefix, 'lib', 'node_modules', 'mcplane');
  assert.ok(!existsSync(join(pkgDir, 'src')), 'the installed package carries bundles, not sources');
  assert.ok(!existsSync(join(pkgDir, 'node_modules', 'tsx')), 'no dev dependencies');
  const { spawn } = await import('node:child_process');
  const child = spawn(join(prefix, 'bin', 'mcctl'), [...conn, 'get', 'pools', '-o', 'name'], { cwd: dir, env });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  assert.equal(await new Promise((r) => child.once('exit', r)), 0, stderr);
  assert.equal(stdout, 'machineconfigpool/master\nmachineconfigpool/worker\n');
  for (const program of ['mcplane-server', 'mcplane-agent']) {
    const r = run(join(prefix, 'bin', program), ['--help'], dir);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^Usage: ${program} `));
  }
});

test('under an older Node the launcher says what it needs', { skip: !existsSync('/usr/bin/node') }, () => {
  const r = spawnSync('/usr/bin/node', [join(REPO_ROOT, 'bin', 'mcctl.mjs'), '--version'], { encoding: 'utf8' });
  const major = Number(/^v(\d+)/.exec(spawnSync('/usr/bin/node', ['--version'], { encoding: 'utf8' }).stdout)?.[1]);
  if (major >= 24) return;
  assert.equal(r.status, 1);
  assert.match(r.stderr, /^mcctl: needs Node\.js 24 or later; \/usr\/bin\/node is v\d+/);
});
