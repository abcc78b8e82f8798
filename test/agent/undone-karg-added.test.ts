// A kernel argument that an unfinished update added (its reboot failed) goes when a new config
// undoes that update: it is not on the next update's deployment, nor on the command line that
// deployment boots. rpm-ostree builds every change on its pending deployment, so the undone
// update's staged deployment has to go (`rpm-ostree cleanup -p`) before the next one is made, and
// the next update's kernel arguments are computed against what that deployment really holds.
// The same when the cleanup fails: the next update computes its change against the pending
// deployment and takes out the undone update's arguments it does not want.
// (The model-based test found it: MCPLANE_MODEL_SEED=1032650931.)

import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { startAgentTestBed, type AgentTestBed } from '../helpers/agent-test-bed.ts';
import { untilNode } from '../helpers/converge.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let bed: AgentTestBed;
let host: SandboxHost;

const target = async () => (await call(bed.c, bed.c.status.getPool.bind(bed.c.status), { name: 'worker' }, 'get')).status!.configuration;
/** Applies 50-kargs with these kernel arguments and returns the pool's new target. */
async function kargs(...args: string[]): Promise<string> {
  const before = await target();
  await call(bed.c, bed.c.config.apply.bind(bed.c.config), { manifests: [{ source: 'k.yaml', text: mcYaml('50-kargs', 'worker', `  kernelArguments: [${args.join(', ')}]\n`) }], dryRun: false }, 'apply');
  for (let now = await target(); ; now = await target()) {
    if (now !== before) return now;
    await new Promise((r) => setTimeout(r, 25));
  }
}
const cmdline = () => readFileSync(host.cmdlineFile, 'utf8').trim().split(/\s+/);

before(async () => {
  if (skip) return;
  bed = await startAgentTestBed(poolYaml('worker', '  maxUnavailable: 100%\n'));
  host = new SandboxHost({
    name: 'undo-add', server: bed.server.address, pki: bed.server.pki, systemd: bed.systemd,
    failableReboot: true,
  });
  await host.start();
});
after(async () => {
  if (skip) return;
  await host?.kill();
  await bed?.close();
});

test('the kernel argument of an update whose reboot failed is not carried into the next update that replaces it', { skip }, async () => {
  const first = await target();
  await untilNode(bed.c, [host], 'undo-add', (n) => n.status!.currentConfig === first && n.status!.state === 'Done');

  writeFileSync(host.rebootFailMarker, '');
  const failed = await kargs('undo.k1=1');
  await untilNode(bed.c, [host], 'undo-add', (n) => n.status!.lastUpdate?.toConfig === failed && n.status!.lastUpdate.result === 'Degraded' && n.status!.phase === 'reboot');
  assert.match(host.rpmOstree('kargs'), /undo\.k1=1/, 'staged, not booted');
  rmSync(host.rebootFailMarker);

  const want = await kargs('undo.k2=2');
  // Its update over (Done, or Degraded had validation caught it): the record says which.
  const node = await untilNode(bed.c, [host], 'undo-add', (n) => n.status!.lastUpdate?.toConfig === want);
  assert.equal(node.status!.lastUpdate!.result, 'Done', node.status!.lastUpdate!.reason);
  assert.ok(cmdline().includes('undo.k2=2'), cmdline().join(' '));
  assert.ok(!cmdline().includes('undo.k1=1'), `the undone update's argument was booted: ${cmdline().join(' ')}`);
  assert.doesNotMatch(host.rpmOstree('kargs'), /undo\.k1=1/);
});

test('and when rpm-ostree cannot drop that update\'s deployment: the failure is logged, and the next update takes the argument out of it', { skip }, async () => {
  writeFileSync(host.rebootFailMarker, '');
  const failed = await kargs('undo.k2=2', 'undo.k3=3');
  await untilNode(bed.c, [host], 'undo-add', (n) => n.status!.lastUpdate?.toConfig === failed && n.status!.lastUpdate.result === 'Degraded' && n.status!.phase === 'reboot');
  rmSync(host.rebootFailMarker);
  host.rpmOstree('standin-fail', 'cleanup');

  const want = await kargs('undo.k2=2', 'undo.k4=4');
  const node = await untilNode(bed.c, [host], 'undo-add', (n) => n.status!.lastUpdate?.toConfig === want);
  assert.equal(node.status!.lastUpdate!.result, 'Done', node.status!.lastUpdate!.reason);
  assert.ok(cmdline().includes('undo.k2=2') && cmdline().includes('undo.k4=4'), cmdline().join(' '));
  assert.ok(!cmdline().includes('undo.k3=3'), `the undone update's argument was booted: ${cmdline().join(' ')}`);
  assert.ok(host.logs.some((l) => l.includes('rpm-ostree cleanup -p') && l.includes('some of the update could not be undone')), 'the failed cleanup is logged');
});
