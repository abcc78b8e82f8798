// A local user swaps a directory on a managed path for a symlink, as fast as a process can, while
// the agent writes there update after update. The symlink is absolute and names a directory under
// the real /var/tmp, outside the sandbox root: the agent's check reads it as a path inside /var
// (so the check passes, as it would for a link made right after the check), while a write that
// follows it lands outside the root. Not one file may ever appear there.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { scaled } from '../helpers/time-scale.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { sandboxFixture } from '../helpers/sandbox-fixture.ts';

const FILES = 60;
// The race runs until it has shown what the test asserts: at least WRITTEN files committed
// through it (updates done, or failed only at validation after committing all their files) and
// at least one refusal, after MIN_UPDATES updates; at most UPDATES (then the assertions below
// fail, naming what was missing). A fixed 40 updates (120 wrote 4,860 files in 114 s, a ninth of
// the suite's CPU) spent most of their CPU after both were in. MCPLANE_RACE_UPDATES runs exactly
// that many.
const WRITTEN = 600;
const MIN_UPDATES = 12;
const UPDATES = Number(process.env.MCPLANE_RACE_UPDATES ?? 40);
const EXACT = process.env.MCPLANE_RACE_UPDATES !== undefined;
let outsideBase: string;

const pool = poolYaml('worker', '  maxUnavailable: 100%\n  disruptionPolicy: {files: [{path: /var/tmp/, actions: [{type: none}]}]}\n');
const config = (round: number) => `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 50-race, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
${Array.from({ length: FILES }, (_, i) => `        - {path: /var/tmp/race/d/f${i}, contents: {source: "data:,round-${round}-${i}"}}`).join('\n')}
`;

// The attacker: renameat2(RENAME_EXCHANGE) swaps the real directory and the symlink atomically,
// in a loop, so the path always exists and is a directory or the symlink half the time each.
// Python's ctypes reaches renameat2, which Node does not expose. A 50 us pause between swaps
// still swaps several thousand times a second, far more often than the agent writes a file,
// and costs a quarter of a core instead of a whole one taken from every other test running;
// the test stops it (SIGSTOP) between updates, when the agent writes nothing, and lets it go
// on (SIGCONT) before the next apply.
const SWAPPER = `
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b, count = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3]
n = 0
while True:
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        raise OSError(ctypes.get_errno(), 'renameat2')
    n += 1
    if n % 1000 == 0:
        open(count, 'w').write(str(n))
    time.sleep(0.00005)
`;

const { skip, server, c, systemd, hosts } = sandboxFixture({ sharedSystemd: true, manifests: [pool] });
after(() => {
  if (outsideBase) rmSync(outsideBase, { recursive: true, force: true });
});

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) out.push(...filesUnder(join(dir, e.name)));
    else out.push(join(dir, e.name));
  }
  return out;
}

// The updates' outcomes as the agent logs them, read incrementally: the test looks every 20 ms,
// and filtering the agent's whole log each time was work that grew with every update.
const outcomeLines: string[] = [];
let scanned = 0;
function finished(h: SandboxHost): number {
  for (; scanned < h.logs.length; scanned++) if (/"msg":"update (done|failed)"/.test(h.logs[scanned]!)) outcomeLines.push(h.logs[scanned]!);
  return outcomeLines.length;
}

test(`a directory swapped with a symlink out of the root during updates of ${FILES} files (${EXACT ? UPDATES : `${MIN_UPDATES} to ${UPDATES}`}): no write escapes`, { skip, timeout: scaled(600_000) }, async () => {
  outsideBase = mkdtempSync('/var/tmp/mcplane-race-');
  const outside = join(outsideBase, 'outside');
  mkdirSync(outside);
  const host = new SandboxHost({ name: 'race', server: server.address, pki: server.pki, systemd });
  hosts.push(host);
  const raceDir = join(host.root, 'var/tmp/race');
  mkdirSync(join(raceDir, 'd'), { recursive: true });
  symlinkSync(outside, join(raceDir, 'd.link'));

  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'r', text: config(0) }], dryRun: false }, 'apply');
  await host.start();
  await untilNode(c, [host], 'race', (n) => n.status!.state === 'Done' && n.status!.currentConfig !== '');

  const countFile = join(host.dir, 'swaps');
  const swapper = spawn('/usr/bin/python3', ['-c', SWAPPER, join(raceDir, 'd'), join(raceDir, 'd.link'), countFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  let swapperError = '';
  swapper.stderr!.on('data', (b) => { swapperError += b; });
  const outcomes = { done: 0, refused: 0, validated: 0, other: [] as string[] };
  let rounds = 0;
  try {
    for (let round = 1; round <= UPDATES; round++) {
      if (!EXACT && round > MIN_UPDATES && outcomes.refused > 0 && (outcomes.done + outcomes.validated) * FILES >= WRITTEN) break;
      rounds = round;
      const before = finished(host);
      swapper.kill('SIGCONT');
      await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'r', text: config(round) }], dryRun: false }, 'apply');
      // 30 s on a quiet machine: an update of 60 files is CPU work a busy machine slows down.
      const deadline = Date.now() + scaled(30_000);
      while (finished(host) === before) {
        if (Date.now() > deadline) throw new Error(`round ${round}: the update did not finish\n${host.logs.slice(-10).join('\n')}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      swapper.kill('SIGSTOP');
      const last = outcomeLines.at(-1)!;
      if (last.includes('update done')) outcomes.done++;
      else if (/symbolic link or not a directory/.test(last)) outcomes.refused++;
      else outcomes.other.push(last);
      if (/"step":"validate"/.test(last)) outcomes.validated++;
      assert.deepEqual(filesUnder(outside), [], `round ${round}: no file was written outside the root`);
    }
  } finally {
    swapper.kill('SIGKILL'); // a stopped process dies of SIGKILL too
    await new Promise((r) => (swapper.exitCode !== null || swapper.signalCode !== null ? r(undefined) : swapper.once('exit', r)));
  }
  assert.equal(swapperError, '', 'the swapper never failed');
  const swaps = Number(readFileSync(countFile, 'utf8'));
  // Updates that reached validation committed all their files (into the real directory, which
  // the swapper then moved under the validator's feet).
  const written = (outcomes.done + outcomes.validated) * FILES;
  console.log(`${rounds} updates: swaps ${swaps}, updates done ${outcomes.done}, refused at write ${outcomes.refused}, failed validation ${outcomes.validated}, other ${outcomes.other.length - outcomes.validated}; files written ${written}`);
  assert.ok(written >= WRITTEN, `the agent wrote hundreds of files through the race (${written})`);
  // The other failures are checks and validations that saw the symlink, each naming what.
  for (const line of outcomes.other) {
    const e = JSON.parse(line.replace(/^<\d>/, '')) as { step: string; object: string; cause: string };
    assert.ok(['check', 'validate'].includes(e.step) && e.object && e.cause, line);
    assert.doesNotMatch(e.cause, /invalid argument, readlink/, 'a link replaced while being resolved is said in words');
  }
  assert.deepEqual(filesUnder(outside), [], 'no file was ever written outside the root');
  assert.ok(swaps > 1000, `the swapper ran (${swaps} swaps)`);
  assert.ok(outcomes.refused > 0, 'the agent met the symlink and refused it at least once');
  // A refusal names the step, the file and the directory that changed.
  const reason = host.logs.find((l) => /symbolic link or not a directory/.test(l))!;
  assert.match(reason, /var\/tmp\/race\/d is a symbolic link or not a directory \(it changed after .* was checked\); refusing to follow it/);

  // With the swapping over, the same agent converges: every file in the real directory.
  if (lstatSync(join(raceDir, 'd')).isSymbolicLink()) {
    rmSync(join(raceDir, 'd'));
    renameSync(join(raceDir, 'd.link'), join(raceDir, 'd'));
  }
  const round = UPDATES + 1;
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'r', text: config(round) }], dryRun: false }, 'apply');
  const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  await untilNode(c, [host], 'race', (n) => n.status!.currentConfig === target && n.status!.state === 'Done');
  for (let i = 0; i < FILES; i++) assert.equal(host.file(`var/tmp/race/d/f${i}`), `round-${round}-${i}`);
  assert.deepEqual(filesUnder(outside), []);
  await host.kill('SIGTERM');
});
