// npm run demo as a new user runs it: it explains what is on screen, ends with the pools Updated
// and a summary per node, and whether it finishes or is interrupted with Ctrl-C, it leaves no
// process and no file behind. Each run gets a TMPDIR of its own, so whatever the demo (or any
// process it starts) creates with os.tmpdir() is seen here, and nothing else on the machine is.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { REPO_ROOT } from '../helpers/run-cli.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { scaled } from '../helpers/time-scale.ts';

const skip = !canRunUserSystemd() && 'the demo needs root to start private systemd user managers';

interface Run { code: number | null; signal: NodeJS.Signals | null; out: string; tmp: string; interruptedAt?: number; exitedAt: number }

/** Runs the demo in its own process group, as a shell runs a foreground job; optionally presses Ctrl-C. */
function runDemo(interruptAfter?: RegExp): Promise<Run> {
  const tmp = mkdtempSync(join(tmpdir(), 'demo-test-tmp-'));
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '-s', 'demo'], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true, env: { ...process.env, TMPDIR: tmp } });
    let out = '';
    let interruptedAt: number | undefined;
    const onData = (d: Buffer): void => {
      out += d;
      if (interruptAfter && interruptedAt === undefined && interruptAfter.test(out)) {
        interruptedAt = Date.now();
        // What Ctrl-C does: SIGINT to every process of the foreground process group.
        process.kill(-child.pid!, 'SIGINT');
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    let code: number | null = null;
    let signal: NodeJS.Signals | null = null;
    child.on('exit', (c, s) => { code = c; signal = s; });
    // 'close' comes when the demo itself is gone too: it holds the output pipe until it exits.
    child.on('close', () => resolve({ code, signal, out, tmp, interruptedAt, exitedAt: Date.now() }));
  });
}

/** Live processes whose command line or environment mentions `path` (the run's TMPDIR). */
function processesUsing(path: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid)) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
      if (cmdline.includes(path) || environ.includes(path)) found.push(`${pid} ${cmdline.replaceAll('\0', ' ')}`);
    } catch { /* exited meanwhile */ }
  }
  return found;
}

/** Waits until no process uses `path`, or returns those still there at the deadline. */
async function processesLeft(path: string, deadline: number): Promise<string[]> {
  for (;;) {
    const left = processesUsing(path);
    if (left.length === 0 || Date.now() >= deadline) return left;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * What the run left in its TMPDIR. tsx (which runs the demo and its agents from source) keeps
 * its cache there, and Node its module compile cache, by design and shared by every such process
 * of the user: not the demo's.
 */
function leftInTmp(tmp: string): string[] {
  return readdirSync(tmp).filter((f) => !/^tsx-\d+$/.test(f) && f !== 'node-compile-cache');
}

test('npm run demo explains its table, ends with the pools Updated, and leaves nothing behind', { skip, timeout: scaled(300_000) }, async () => {
  const run = await runDemo();
  try {
    const { code, out } = run;
    assert.equal(code, 0, out);
    assert.match(out, /pool worker\s+rendered-worker-\S+\s+machines 2, updated 2, degraded 0\s+Updated=True Updating=False Degraded=False/);
    assert.match(out, /pool infra\s+rendered-infra-\S+\s+machines 1, updated 1, degraded 0\s+Updated=True/);
    assert.match(out, /GET \/config\/worker \(worker's bootstrap token\)/);
    assert.match(out, /GET \/config\/infra \(infra's bootstrap token\)/, 'a token made for infra serves infra');
    // Where to look in a browser: the dashboard against this demo's server and credentials.
    assert.match(out, /live view in a browser while the demo runs \(from another terminal\): npm run -s mcctl -- --server 127\.0\.0\.1:\d+ --pki-dir \S+\/pki dashboard$/m);
    assert.match(out, /^ {3}Prometheus metrics while the demo runs: curl -s http:\/\/127\.0\.0\.1:\d+\/metrics \| grep -E '\^\(mco\|mcplane\)_'$/m);
    // Each host's update history: its first config and the change, the last with its phases.
    assert.equal(out.match(/^\s+history\s+2 updates; the last Done in \d+ms: check \d+ms, diff \d+ms, plan \d+ms, apply \d+ms, actions \d+ms, validate \d+ms$/gm)?.length, 3, out);
    for (const node of ['worker-a', 'worker-b', 'infra-a']) assert.match(out, new RegExp(`^\\s+${node}\\s+pool \\w+, rendered-\\S+, Done`, 'm'));
    // It says what the viewer is looking at: the columns, and why new hosts do not queue.
    assert.match(out, /^\s+TIME\s+NODE\s+STATE\s+PHASE\s+CURRENT -> DESIRED CONFIG\s+REASON$/m);
    assert.match(out, /New hosts skip the queue: a host with no config yet serves nothing, so it gets its pool's\s+config at once without using maxUnavailable/);
    // The header's columns line up with the lines under it.
    const header = out.split('\n').find((l) => /^\s+TIME\s+NODE/.test(l))!;
    const line = out.split('\n').find((l) => /^\s+\d\d:\d\d:\d\d\s+worker-a\s+(Working|Done)/.test(l))!;
    for (const [col, re] of [['NODE', /worker-a/], ['STATE', /Working|Done/]] as const) assert.equal(header.indexOf(col), line.search(re), `${col} column:\n${header}\n${line}`);
    // maxUnavailable 1: in the rolling update the second worker starts only after the first is
    // done (which goes first depends on which registered first).
    const rolling = out.slice(out.indexOf('3. A change'), out.indexOf('4. Where'));
    const working = (n: string) => rolling.search(new RegExp(`${n}\\s+Working`));
    const [first, second] = ['worker-a', 'worker-b'].sort((a, b) => working(a) - working(b));
    assert.ok(working(first!) >= 0 && working(second!) >= 0, rolling);
    const firstDone = rolling.slice(working(first!)).search(new RegExp(`${first}\\s+Done\\s+done`)) + working(first!);
    assert.ok(firstDone > working(first!) && firstDone < working(second!), rolling);

    assert.deepEqual(leftInTmp(run.tmp), [], 'every directory the demo made is gone (host roots with node keys, systemd dirs)');
    assert.deepEqual(await processesLeft(run.tmp, Date.now() + 2000), [], 'no process of the demo is left');
  } finally {
    rmSync(run.tmp, { recursive: true, force: true });
  }
});

for (const [when, after] of [['while the hosts start', /starting mcplane-agent/], ['during the rolling update', /3\. A change[\s\S]*Working/]] as const) {
  test(`Ctrl-C ${when} stops every process within 5 s and removes every directory`, { skip, timeout: scaled(300_000) }, async () => {
    const run = await runDemo(after);
    try {
      assert.ok(run.interruptedAt, `the demo reached the point to interrupt:\n${run.out}`);
      assert.match(run.out, /interrupted: stopping every process/);
      // The demo exits 130; npm, which got the same SIGINT, may report that or die of the signal.
      assert.ok(run.code === 130 || run.signal === 'SIGINT', `${run.code ?? run.signal}\n${run.out}`);
      assert.ok(run.exitedAt - run.interruptedAt! <= 5000, `exited ${run.exitedAt - run.interruptedAt!} ms after Ctrl-C`);
      assert.deepEqual(await processesLeft(run.tmp, run.interruptedAt! + 5000), [], 'every process stopped within 5 s');
      assert.deepEqual(leftInTmp(run.tmp), []);
      assert.doesNotMatch(run.out, /demo failed/);
    } finally {
      rmSync(run.tmp, { recursive: true, force: true });
    }
  });
}
