// kill -9 at every step of an update. At the crash no file is half-written; the restarted agent
// rolls back (crash while staging) or forward (crash while committing), so the managed files
// end all old or all new, and it converges with no temp file left and no backup lost.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { canRunUserSystemd, type UserSystemd } from '../../sandbox/user-systemd.ts';
import { poolYaml } from '../helpers/manifests.ts';
import type { TestServer } from '../helpers/test-server.ts';
import { startAgentTestBed, type AgentTestBed } from '../helpers/agent-test-bed.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
const FILES = 12;
let server: TestServer;
let c: Clients;
let systemd: UserSystemd;
let bed: AgentTestBed | undefined;

// A hook at every point, so the hooks' steps are crossed (and killed in) as every other step.
const hooks = ['beforeUpdating', 'afterUpdating', 'beforeRebooting', 'afterRebooting'].map((p) => `    ${p}: [{run: [/bin/true]}]\n`).join('');
const pool = poolYaml('worker', `  maxUnavailable: 100%\n  disruptionPolicy: {files: [{path: /etc/crash, actions: [{type: none}]}]}\n  hooks:\n${hooks}`);
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

before(async () => {
  if (skip) return;
  bed = await startAgentTestBed(pool);
  ({ server, c, systemd } = bed);
});
after(async () => {
  if (skip) return;
  await bed?.close();
});

const POINTS = ['before-updating', 'hook-passed:0', 'staging', 'staging-file:0', 'staging-file:6', 'committing', 'commit-file:0', 'commit-file:6', 'units-done', 'os-done', 'after-updating', 'before-rebooting', 'rebooting'];
// after-rebooting is not here: only the agent of the next boot reaches it, and the sandbox's reboot
// starts that one with the host's environment, without the failpoint.
/** Points before anything is written: the files are all old at the crash. */
const BEFORE_FILES = new Set(['before-updating', 'hook-passed:0', 'committing']);

for (const [n, point] of POINTS.entries()) {
  test(`kill -9 at ${point}: all old or all new, then convergence`, { skip }, async () => {
    const name = `crash-${n}`;
    const host = new SandboxHost({ name, server: server.address, pki: server.pki, systemd });
    writeFileSync(join(host.root, 'etc/crash-takeover.conf'), 'original\n');
    await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'a', text: config('A') }], dryRun: false }, 'apply');
    const a = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
    await host.start();
    await untilNode(c, [host], name, (x) => x.status!.currentConfig === a && x.status!.state === 'Done');
    assert.equal(filesState(host), 'A');
    await host.kill();

    await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'b', text: config('B') }], dryRun: false }, 'apply');
    const b = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
    host.spawnAgent({ MCPLANE_FAILPOINT: point });
    assert.equal(await host.exited(), -1, `the failpoint ${point} killed the agent`);
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
