// kill -9 at every step of an update. At the crash no file is half-written; the restarted agent
// rolls back (crash while staging) or forward (crash while committing), so the managed files
// end all old or all new, and it converges with no temp file left and no backup lost.
//
// One host per kill point, all on one server and one systemd user manager. They reach the first
// config together (the fixture's setUp), then each point's test crashes its own host's agent on
// the way to the second config and restarts it, four tests at a time: each waits mostly on its
// agent's update steps, hooks, reboot and report (one at a time the file used under half a core:
// 136 s of CPU in 309 s, 8-70 s a test, at load 9).

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { sandboxFixture } from '../helpers/sandbox-fixture.ts';
import { scaled } from '../helpers/time-scale.ts';

const FILES = 12;
// A hook at every point, so the hooks' steps are crossed (and killed in) as every other step.
const hooks = ['beforeUpdating', 'afterUpdating', 'beforeRebooting', 'afterRebooting'].map((p) => `    ${p}: [{run: [/bin/true]}]\n`).join('');
const pool = poolYaml('worker', `  maxUnavailable: 100%\n  disruptionPolicy: {files: [{path: /etc/crash, actions: [{type: none}]}]}\n  hooks:\n${hooks}`);
const { skip, server, c, systemd, hosts, apply, target } = sandboxFixture({
  sharedSystemd: true, manifests: [pool], setUp: everyHostOnA,
  // 13 hosts brought to the first config, which 13 tests did one each within 5 minutes each.
  setUpTimeoutMs: scaled(600_000),
});

function config(version: 'A' | 'B'): string {
  const files = Array.from({ length: FILES }, (_, i) => `        - {path: /etc/crash/f${String(i).padStart(2, '0')}, contents: {source: "data:,${version}-${i}"}}`);
  files.push(`        - {path: /etc/crash/only-${version.toLowerCase()}, contents: {source: "data:,${version}"}}`);
  files.push('        - {path: /etc/crash-takeover.conf, contents: {source: "data:,managed"}}');
  return `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 50-crash, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  kernelArguments: [${version === 'B' ? 'crash=b' : 'crash=a'}]
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
${files.join('\n')}
`;
}

/** "A", "B", or a description of the mix that must never be seen. */
function filesState(host: SandboxHost): string {
  const state = (v: 'A' | 'B') =>
    Array.from({ length: FILES }, (_, i) => host.file(`etc/crash/f${String(i).padStart(2, '0')}`) === `${v}-${i}`).every(Boolean) &&
    host.file(`etc/crash/only-${v.toLowerCase()}`) === v && host.file(`etc/crash/only-${v === 'A' ? 'b' : 'a'}`) === undefined;
  if (state('A')) return 'A';
  if (state('B')) return 'B';
  return `mixed: ${readdirSync(join(host.root, 'etc/crash')).map((f) => `${f}=${host.file(`etc/crash/${f}`)}`).join(' ')}`;
}

const leftovers = (host: SandboxHost) => readdirSync(join(host.root, 'etc/crash')).filter((f) => f.includes('.mcplane-'));


const POINTS = ['before-updating', 'hook-passed:0', 'staging', 'staging-file:0', 'staging-file:6', 'committing', 'commit-file:0', 'commit-file:6', 'units-done', 'os-done', 'after-updating', 'before-rebooting', 'rebooting'];
// after-rebooting is not here: only the agent of the next boot reaches it, and the sandbox's reboot
// starts that one with the host's environment, without the failpoint.
/** Points before anything is written: the files are all old at the crash. */
const BEFORE_FILES = new Set(['before-updating', 'hook-passed:0', 'committing']);

/** The pool's target on the first config and on the second, which every host is crashed on the way to. */
let a = '';
let b = '';
const hostOf = new Map<string, SandboxHost>();

// In the fixture's set-up, after the server, the manager and the pool (a file's before() hooks run
// side by side, so a second one could not wait for the first).
async function everyHostOnA(): Promise<void> {
  await apply(config('A'));
  a = await target();
  await Promise.all(POINTS.map(async (point, n) => {
    const name = `crash-${n}`;
    const host = new SandboxHost({ name, server: server.address, pki: server.pki, systemd });
    hosts.push(host);
    hostOf.set(point, host);
    writeFileSync(join(host.root, 'etc/crash-takeover.conf'), 'original\n');
    await host.start();
    await untilNode(c, [host], name, (x) => x.status!.currentConfig === a && x.status!.state === 'Done');
    assert.equal(filesState(host), 'A', `${name} on the first config`);
    await host.kill();
  }));
  // Every agent is down: the second config reaches each only through its crashed and restarted run.
  await apply(config('B'));
  await eventually(async () => (b = await target()) !== a, 10_000, 'the pool targets the second config');
}

// Four at a time: all 13 at once, beside a loaded machine (load 25 on 2 cores), stretched each
// agent's steps (its hooks run as units on the one shared manager) past the wait for its crash.
// An hour for the group as a whole: the run's --test-timeout (5 min) would otherwise bound all 13
// tests together as it bounded each alone (and Infinity here falls back to it); each test keeps
// that bound for itself.
describe('kill -9 at every step', { concurrency: 4, timeout: 3_600_000 }, () => {
  for (const point of POINTS) {
    test(`kill -9 at ${point}: all old or all new, then convergence`, { skip }, async () => {
      const host = hostOf.get(point)!;
      const name = host.options.name;
      host.spawnAgent({ MCPLANE_FAILPOINT: point });
      // Up to 60 s on a quiet machine (scaled): the agent crosses up to a dozen steps, four hooks
      // and a reboot's staging before its failpoint.
      assert.equal(await host.exited(60_000), -1, `the failpoint ${point} killed the agent`);
      // At the instant of the crash every file is whole (old or new bytes, never a mix); before
      // the commit point they are all old; inside the rename loop the journal says roll forward.
      for (let i = 0; i < FILES; i++) {
        const content = host.file(`etc/crash/f${String(i).padStart(2, '0')}`);
        assert.ok(content === `A-${i}` || content === `B-${i}`, `f${i} is whole at ${point}: ${content}`);
      }
      const atCrash = filesState(host);
      const step = JSON.parse(readFileSync(join(host.stateDir, 'journal.json'), 'utf8')).pending?.step;
      if (point.startsWith('staging') || BEFORE_FILES.has(point)) assert.equal(atCrash, 'A', `before the commit point: ${atCrash}`);
      else if (point.startsWith('commit-file')) assert.equal(step, 'committing', 'a crash inside the renames is rolled forward on restart');
      else assert.equal(atCrash, 'B', `after the files were committed: ${atCrash}`);

      host.spawnAgent();
      const node = await untilNode(c, [host], name, (x) => x.status!.currentConfig === b && x.status!.state === 'Done');
      assert.equal(filesState(host), 'B');
      assert.deepEqual(leftovers(host), [], 'no temp or undo file is left behind');
      assert.ok(node.status!.os!.kernelArguments.includes('crash=b') && !node.status!.os!.kernelArguments.includes('crash=a'));
      const journal = JSON.parse(readFileSync(join(host.stateDir, 'journal.json'), 'utf8'));
      const backup = journal.backups[join(host.root, 'etc/crash-takeover.conf')];
      assert.ok(backup, 'the backup of the taken-over original is still recorded');
      assert.equal(readFileSync(backup.backupFile, 'utf8'), 'original\n');
      await host.kill('SIGTERM');
    });
  }
});
