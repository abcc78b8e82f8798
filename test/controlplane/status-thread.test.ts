// --status-listen: StatusService from a thread of its own, over real TLS, fed by the replica's
// store through the relay. The first test is the point of it: with the replica's main thread
// held, reads on the status port are answered, and reads on the main port are not.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { call } from '../../src/cli/client/call.ts';
import { connect, resolveConnection, type Clients } from '../../src/cli/client/connection.ts';
import { pkiInitCommand } from '../../src/cli/commands/pki.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { mcYaml } from '../helpers/manifests.ts';
import { REPO_ROOT, runCliAsync } from '../helpers/run-cli.ts';
import { spawnServer } from '../helpers/server-process.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer | undefined;
const cleanup: (() => void)[] = [];
afterEach(async () => {
  for (const done of cleanup.splice(0)) done();
  await server?.close();
  server = undefined;
});

const statusAddress = (s: TestServer): string => `127.0.0.1:${s.handle.statusPort}`;
function reads(s: TestServer, statusServer = statusAddress(s)): Clients {
  const c = connect({ server: s.address, statusServer, pkiDir: s.pki.dir, config: '/dev/null' });
  cleanup.push(() => c.close());
  return c;
}

/** Holds this thread (the server's main thread: the server runs in this process) for `ms`. */
function holdMainThread(ms: number): number {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  return Date.now();
}

/** A reader process connected to `address`; `go` reads `count` times and resolves with when each was answered. */
async function reader(address: string, pkiDir: string, count: number): Promise<{ go(): void; answeredAt: Promise<number[]> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/status-reader-process.ts', address, pkiDir, String(count)], { cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  cleanup.push(() => child.kill());
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  assert.equal((await lines.next()).value, 'ready');
  return {
    go: () => child.stdin!.write('go\n'),
    answeredAt: lines.next().then((l) => JSON.parse(l.value as string) as number[]),
  };
}

test('with the main thread held, reads on --status-listen are answered and reads on the main port wait', async () => {
  server = await startTestServer({ statusListen: '127.0.0.1:0' });
  const onStatusPort = await reader(statusAddress(server), server.pki.dir, 5);
  const onMainPort = await reader(server.address, server.pki.dir, 1);
  onStatusPort.go();
  onMainPort.go();
  const releasedAt = holdMainThread(3000);
  const [statusTimes, mainTimes] = await Promise.all([onStatusPort.answeredAt, onMainPort.answeredAt]);
  assert.equal(statusTimes.length, 5);
  assert.ok(statusTimes.every((t) => t < releasedAt), `status port answers at ${statusTimes.map((t) => t - releasedAt).join(', ')} ms from the release (all should be before it)`);
  assert.ok(mainTimes[0]! >= releasedAt, `the main port answered ${releasedAt - mainTimes[0]!} ms before its thread was released`);
});

test('the status port follows the store: an Apply on the main port shows there; writes are not served on it', async () => {
  server = await startTestServer({ statusListen: '127.0.0.1:0' });
  const c = reads(server);
  const before = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'mc.yaml', text: mcYaml('50-x', 'worker', '  kernelArguments: [a=1]\n') }], dryRun: false }, 'apply');
  await eventually(async () => {
    const now = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
    return now !== before && now.startsWith('rendered-worker-');
  }, 10_000, 'the status port shows the new rendered config');
  // GetServerInfo: the replica's name and leadership, relayed.
  const info = await call(c, c.status.getServerInfo.bind(c.status), {}, 'version');
  assert.equal(info.replica, server.handle.controlPlane.replica.name);
  assert.equal(info.leader, true);
  // GetNodeHistory goes to the store through the relay: an unknown node is NotFound, named.
  await assert.rejects(call(c, c.status.getNodeHistory.bind(c.status), { name: 'ghost' }, 'history'), /Node\/ghost not found/);
  // The thread serves StatusService only: a write sent to it is refused, not half-done.
  const writes = connect({ server: statusAddress(server), pkiDir: server.pki.dir, config: '/dev/null' });
  cleanup.push(() => writes.close());
  await assert.rejects(
    new Promise((resolve, reject) => writes.config.apply({ manifests: [], dryRun: true }, (err, res) => (err ? reject(err) : resolve(res)))),
    (err: { code: number }) => err.code === Status.UNIMPLEMENTED,
  );
});

test('a Watch on the status port sees changes, and ends saying the server is shutting down', async () => {
  server = await startTestServer({ statusListen: '127.0.0.1:0' });
  const c = reads(server);
  const events: string[] = [];
  const ended = new Promise<{ code: number; details: string }>((resolve) => {
    const stream = c.status.watch({ pools: true, nodes: false, events: false });
    stream.on('data', (e: { type: string; pool?: { name: string } }) => events.push(`${e.type} ${e.pool?.name ?? ''}`.trim()));
    stream.on('error', (err: { code: number; details: string }) => resolve(err));
  });
  await eventually(() => events.includes('SYNCED'), 5000, 'the initial list');
  assert.ok(events.includes('ADDED worker'));
  const admin = server.admin();
  await call(admin, admin.config.setPoolPaused.bind(admin.config), { name: 'worker', paused: true }, 'pause');
  await eventually(() => events.includes('MODIFIED worker'), 5000, 'the pause arrives on the status port');
  const closing = Date.now();
  await server.close(); // grace 1 s
  server = undefined;
  // The thread ended by itself: one that had to be terminated would take the grace and 2 s more.
  assert.ok(Date.now() - closing < 2500, `the server took ${Date.now() - closing} ms to close`);
  const end = await ended;
  assert.equal(end.code, Status.UNAVAILABLE);
  assert.match(end.details, /shutting down/);
});

test('mcctl --status-server (and MCPLANE_STATUS_SERVER) sends reads there and writes to --server; wait and rollout status read --server', async () => {
  server = await startTestServer({ statusListen: '127.0.0.1:0' });
  const conn = ['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null'];
  const pools = await runCliAsync([...conn, '--status-server', statusAddress(server), 'get', 'pools']);
  assert.equal(pools.status, 0, pools.stderr);
  assert.match(pools.stdout, /^worker\s/m);
  // Nothing listens at 127.0.0.1:1: reads sent there fail, naming it; writes still go to --server.
  const nowhere = ['--status-server', '127.0.0.1:1', '--request-timeout', '2'];
  const read = await runCliAsync([...conn, ...nowhere, 'get', 'pools']);
  assert.notEqual(read.status, 0);
  assert.match(read.stderr, /127\.0\.0\.1:1/);
  // From the environment, beside the server it goes with.
  const fromEnv = await runCliAsync(['--pki-dir', server.pki.dir, '--config', '/dev/null', '--request-timeout', '2', 'get', 'nodes'], { env: { ...process.env, MCPLANE_SERVER: server.address, MCPLANE_STATUS_SERVER: '127.0.0.1:1' } });
  assert.notEqual(fromEnv.status, 0, 'MCPLANE_STATUS_SERVER is where reads go');
  assert.match(fromEnv.stderr, /127\.0\.0\.1:1/);
  const write = await runCliAsync([...conn, ...nowhere, 'pause', 'pool', 'master']);
  assert.equal(write.status, 0, write.stderr);
  // Right after a write, wait and rollout status read the server that acknowledged it.
  const rollout = await runCliAsync([...conn, ...nowhere, 'rollout', 'status', 'pool/worker', '--timeout', '20s']);
  assert.equal(rollout.status, 0, rollout.stderr);
});

test('a statusServer goes with the server of its own level: the file\'s is not used under a --server flag', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcctl-config-'));
  const file = join(dir, 'mcctl.yaml');
  writeFileSync(file, 'server: prod:7443\nstatusServer: prod:7444\ninsecure: true\ncontexts:\n  - {name: lab, server: lab:7443}\n');
  try {
    assert.equal(resolveConnection({ config: file }).statusServer, 'prod:7444');
    assert.equal(resolveConnection({ config: file, server: 'other:7443' }).statusServer, undefined);
    assert.equal(resolveConnection({ config: file, server: 'other:7443', statusServer: 'other:7444' }).statusServer, 'other:7444');
    assert.equal(resolveConnection({ config: file, context: 'lab' }).statusServer, undefined, 'a context without one does not take the defaults\' one');
    assert.equal(resolveConnection({ config: file, readsFromServer: true }).statusServer, undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a --status-listen port already taken stops the server at start, naming the flag', async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const port = (taken.address() as { port: number }).port;
  await assert.rejects(startTestServer({ statusListen: `127.0.0.1:${port}` }), new RegExp(`--status-listen 127\\.0\\.0\\.1:${port}`));
  taken.close();
});

test('the program (the bundle in the suite) runs the status thread, logs its address, and exits 0 on SIGTERM', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'status-thread-'));
  const pkiDir = join(dir, 'pki');
  await pkiInitCommand(pkiDir, [], []);
  const proc = await spawnServer(['--data-dir', join(dir, 'data'), '--listen', '127.0.0.1:0', '--status-listen', '127.0.0.1:0', '--pki-dir', pkiDir, '--no-bootstrap']);
  try {
    const status = /"status":"([^"]+)"/.exec(proc.logs.find((l) => l.includes('mcplane-server ready'))!)?.[1];
    assert.ok(status && status !== proc.address, `the ready line names the status address: ${proc.logs.at(-1)}`);
    const pools = await runCliAsync(['--server', proc.address, '--status-server', status, '--pki-dir', pkiDir, '--config', '/dev/null', 'get', 'pools']);
    assert.equal(pools.status, 0, pools.stderr);
    assert.match(pools.stdout, /^master\s.*\n^worker\s/m);
    proc.child.kill('SIGTERM');
    assert.equal(await proc.exited, 0, proc.logs.join('\n'));
  } finally {
    proc.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
