// The programs' log shape: human-readable, timestamped lines on a terminal; JSON with the
// journald priority prefix under systemd and into pipes. The terminal is a real pseudo-terminal
// from util-linux's script(1); "under systemd" is the environment systemd gives its services
// (INVOCATION_ID, JOURNAL_STREAM).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { bundlePath, programArgs, REPO_ROOT } from '../helpers/run-cli.ts';

const READY = /mcplane-server ready/;

/** Runs mcplane-server until it says it is ready, on a pseudo-terminal or a pipe; returns its output. */
async function serverOutput(options: { pty: boolean; env?: NodeJS.ProcessEnv; bundle?: boolean }): Promise<string> {
  // The suite's bundles when it built them (a start through tsx costs seconds of CPU).
  const entry = options.bundle ? [bundlePath('mcplane-server')] : programArgs('mcplane-server');
  const argv = [process.execPath, ...entry, '--data-dir', mkdtempSync(join(tmpdir(), 'mcplane-log-')), '--listen', '127.0.0.1:0', '--insecure', '--no-bootstrap'];
  const env = { ...process.env, ...options.env };
  for (const key of ['INVOCATION_ID', 'JOURNAL_STREAM', 'MCPLANE_LOG_FORMAT']) if (!options.env?.[key]) delete env[key];
  const child = options.pty
    ? spawn('script', ['-qec', `timeout -s TERM 30 ${argv.map((a) => `'${a}'`).join(' ')}`, '/dev/null'], { cwd: REPO_ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(argv[0]!, argv.slice(1), { cwd: REPO_ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const exited = new Promise((r) => child.once('exit', r));
  const deadline = Date.now() + 20_000;
  while (!READY.test(out)) {
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  process.kill(-child.pid!, 'SIGTERM');
  await exited;
  assert.match(out, READY, out);
  return out;
}

// ESC [ ... m: the colours pino-pretty adds on a terminal.
const plain = (text: string): string => text.replace(/\x1b\[[0-9;]*m/g, '').replace(/\r/g, '');

test('on a terminal, logs are human-readable timestamped lines', async () => {
  const out = plain(await serverOutput({ pty: true }));
  const ready = out.split('\n').find((l) => READY.test(l))!;
  assert.match(ready, /^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] INFO \(mcplane-server\): mcplane-server ready \{.*"grpc":"127\.0\.0\.1:\d+"/);
  assert.doesNotMatch(out, /^<\d>\{/m);
});

test('under systemd (INVOCATION_ID or JOURNAL_STREAM), even on a terminal, logs stay JSON with the priority prefix', async () => {
  for (const env of [{ INVOCATION_ID: '0123456789abcdef' }, { JOURNAL_STREAM: '8:12345' }]) {
    const out = plain(await serverOutput({ pty: true, env }));
    const ready = out.split('\n').find((l) => READY.test(l))!;
    assert.match(ready, /^<6>\{"level":"info","name":"mcplane-server",/);
    const record = JSON.parse(ready.slice(3));
    assert.equal(record.time, undefined, 'journald records the time');
    assert.equal(record.pid, undefined);
  }
});

test('into a pipe, logs are JSON as before', async () => {
  const out = await serverOutput({ pty: false });
  assert.match(out.split('\n').find((l) => READY.test(l))!, /^<6>\{"level":"info",/);
});

test('the esbuild bundle logs human-readable lines on a terminal too (pino-pretty in-process, no transport)', async () => {
  assert.ok(existsSync(join(REPO_ROOT, bundlePath('mcplane-server'))));
  const out = plain(await serverOutput({ pty: true, bundle: true }));
  assert.match(out, /^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] INFO \(mcplane-server\): mcplane-server ready/m);
});
