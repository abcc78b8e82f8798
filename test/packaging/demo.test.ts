// npm run demo as a new user runs it: it ends with the pools Updated and a summary per node, and
// whether it finishes or is interrupted with Ctrl-C, it leaves no process and no directory.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import { REPO_ROOT } from '../helpers/run-cli.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';

const skip = !canRunUserSystemd() && 'the demo needs root to start private systemd user managers';
const demoDirs = () => readdirSync(tmpdir()).filter((d) => d.startsWith('mcplane-demo-')).sort();
const leftovers = (dirs: string[]) => spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).stdout.split('\n').filter((l) => dirs.some((d) => l.includes(d)));

function runDemo(interruptAfter?: RegExp): Promise<{ code: number | null; out: string; dir: string }> {
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '-s', 'demo'], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let dir = '';
    let sent = false;
    const onData = (d: Buffer): void => {
      out += d;
      dir ||= /store in (\/\S+)\/data/.exec(out)?.[1] ?? '';
      if (interruptAfter && !sent && interruptAfter.test(out)) {
        sent = true;
        // What Ctrl-C does: SIGINT to the foreground process group (npm and the demo under it).
        spawnSync('pkill', ['-INT', '-f', 'scripts/demo.ts']);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('close', (code) => resolve({ code, out, dir }));
  });
}

test('npm run demo ends with the pools Updated and what changed on each node', { skip, timeout: 300_000 }, async () => {
  const before = demoDirs();
  const { code, out, dir } = await runDemo();
  assert.equal(code, 0, out);
  assert.match(out, /pool worker\s+rendered-worker-\S+\s+machines 2, updated 2, degraded 0\s+Updated=True Updating=False Degraded=False/);
  assert.match(out, /pool infra\s+rendered-infra-\S+\s+machines 1, updated 1, degraded 0\s+Updated=True/);
  assert.match(out, /GET \/config\/worker \(bootstrap token\)/);
  for (const node of ['worker-a', 'worker-b', 'infra-a']) assert.match(out, new RegExp(`^\\s+${node}\\s+pool \\w+, rendered-\\S+, Done`, 'm'));
  // maxUnavailable 1: in the rolling update the second worker starts only after the first is
  // done (which goes first depends on which registered first).
  const rolling = out.slice(out.indexOf('3. A change'), out.indexOf('4. Where'));
  const working = (n: string) => rolling.indexOf(`${n}  Working`);
  const [first, second] = ['worker-a', 'worker-b'].sort((a, b) => working(a) - working(b));
  assert.ok(working(first!) >= 0 && working(second!) >= 0, rolling);
  const firstDone = rolling.indexOf(`${first}  Done     done`, working(first!));
  assert.ok(firstDone > 0 && firstDone < working(second!), rolling);
  assert.deepEqual(demoDirs(), before, 'the demo removed its directory');
  assert.deepEqual(leftovers([dir]), [], 'no process of the demo is left');
});

test('Ctrl-C in the middle stops every process and removes every directory', { skip, timeout: 300_000 }, async () => {
  const before = demoDirs();
  const { out, dir } = await runDemo(/starting mcplane-agent/);
  assert.match(out, /interrupted: stopping every process/);
  await new Promise((r) => setTimeout(r, 500));
  assert.deepEqual(demoDirs(), before);
  assert.deepEqual(leftovers([dir]), []);
});
