// mcctl watch under a real server process that is stopped and started again: it must say
// so, reconnect, and go on; or exit non-zero saying why. Never exit 0 silently.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { REPO_ROOT, runCliAsync } from '../helpers/run-cli.ts';
import { spawnServer, type ServerProcess } from '../helpers/server-process.ts';
import { testPki } from '../helpers/test-pki.ts';

function startWatch(conn: string[], extra: string[] = []) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...conn, 'watch', ...extra], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => { out.stdout += d; });
  child.stderr.on('data', (d) => { out.stderr += d; });
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => { exitCode = code; resolve(code); }));
  const until = async (what: 'stdout' | 'stderr', re: RegExp, timeoutMs = 20_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!re.test(out[what])) {
      if (exitCode !== undefined) throw new Error(`mcctl watch exited ${exitCode} before ${re}:\n${out.stdout}\n${out.stderr}`);
      if (Date.now() > deadline) throw new Error(`no ${re} on ${what} within ${timeoutMs} ms:\n${out.stdout}\n${out.stderr}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  return { child, out, exited, until };
}

async function stop(server: ServerProcess): Promise<void> {
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0);
}

test('mcctl watch reconnects after the server restarts, says so on stderr, and prints what changed', async () => {
  const pki = await testPki();
  const dataDir = mkdtempSync(join(tmpdir(), 'mcplane-watch-'));
  const args = (listen: string) => ['--data-dir', dataDir, '--listen', listen, '--pki-dir', pki.dir, '--no-bootstrap'];
  let server = await spawnServer(args('127.0.0.1:0'));
  const address = server.address;
  const conn = ['--server', address, '--pki-dir', pki.dir, '--config', '/dev/null'];
  const watch = startWatch(conn, ['--pools']);
  try {
    await watch.until('stdout', /current state above; changes follow/);
    assert.match(watch.out.stdout, /ADDED\s+pool\/worker .*Updated=True/);

    await stop(server);
    await watch.until('stderr', /mcctl: lost the watch on 127\.0\.0\.1:\d+ \((the server closed the stream: restarting or stopping|nothing listens there.*)\); reconnecting in \d+\.\ds \(attempt 1\)/);
    // Changed while the watch was down: seen after the reconnect, as a change.
    server = await spawnServer(args(address));
    const paused = await runCliAsync([...conn, 'pause', 'pool', 'worker']);
    assert.equal(paused.status, 0, paused.stderr);
    await watch.until('stderr', /mcctl: reconnected to 127\.0\.0\.1:\d+/);
    await watch.until('stdout', /MODIFIED\s+pool\/worker .*\(paused\)/);
    // Unchanged pools are not printed again after the reconnect.
    assert.equal(watch.out.stdout.match(/pool\/master/g)?.length, 1, watch.out.stdout);

    // And the stream goes on after the reconnect.
    assert.equal((await runCliAsync([...conn, 'resume', 'pool', 'worker'])).status, 0);
    await watch.until('stdout', /MODIFIED\s+pool\/worker (?!.*paused).*$/m);
    watch.child.kill('SIGINT');
    assert.equal(await watch.exited, 0);
  } finally {
    watch.child.kill('SIGKILL');
    server.child.kill('SIGKILL');
  }
});

test('mcctl watch gives up with a non-zero exit and the reason when the server stays away', async () => {
  const pki = await testPki();
  const server = await spawnServer(['--data-dir', mkdtempSync(join(tmpdir(), 'mcplane-watch-')), '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap']);
  const conn = ['--server', server.address, '--pki-dir', pki.dir, '--config', '/dev/null', '--request-timeout', '1'];
  const watch = startWatch(conn, ['--give-up-after', '2s']);
  try {
    await watch.until('stdout', /current state above/);
    await stop(server);
    const code = await watch.exited;
    assert.equal(code, 1, watch.out.stderr);
    assert.match(watch.out.stderr, /reconnecting in/);
    assert.match(watch.out.stderr, /^error: watch: gave up after \d+s without a connection to 127\.0\.0\.1:\d+: /m);
  } finally {
    watch.child.kill('SIGKILL');
    server.child.kill('SIGKILL');
  }
});
