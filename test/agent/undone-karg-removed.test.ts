// A kernel argument that an unfinished update removed (its reboot failed) is back when a new
// config that keeps it undoes that update: a later update's deployment still has it, and so does
// the command line that deployment boots. rpm-ostree builds every change on its pending
// deployment, so the undone update's staged deployment has to go (`rpm-ostree cleanup -p`), and
// each update's kernel arguments are computed against what the pending deployment really holds.
// (The model-based test found it: MCPLANE_MODEL_SEED=1515066152 and 680357874.)

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
/** Applies 50-kargs with these kernel arguments (and a file, `motd`) and returns the pool's new target. */
async function kargs(args: string[], motd = 'one'): Promise<string> {
  const before = await target();
  const spec = `  kernelArguments: [${args.join(', ')}]
  config:
    ignition: {version: 3.4.0}
    storage: {files: [{path: /etc/undo/motd, mode: 420, contents: {source: "data:,${motd}"}}]}
`;
  await call(bed.c, bed.c.config.apply.bind(bed.c.config), { manifests: [{ source: 'k.yaml', text: mcYaml('50-kargs', 'worker', spec) }], dryRun: false }, 'apply');
  for (let now = await target(); ; now = await target()) {
    if (now !== before) return now;
    await new Promise((r) => setTimeout(r, 25));
  }
}
const cmdline = () => readFileSync(host.cmdlineFile, 'utf8').trim().split(/\s+/);

before(async () => {
  if (skip) return;
  bed = await startAgentTestBed(poolYaml('worker', '  maxUnavailable: 100%\n  disruptionPolicy:\n    files: [{path: /etc/undo/, actions: [{type: none}]}]\n'));
  host = new SandboxHost({
    name: 'undo-remove', server: bed.server.address, pki: bed.server.pki, systemd: bed.systemd,
    failableReboot: true,
  });
  await host.start();
});
after(async () => {
  if (skip) return;
  await host?.kill();
  await bed?.close();
});

test('a kernel argument that an update whose reboot failed removed is back on later deployments once a config that keeps it replaces that update', { skip }, async () => {
  const first = await kargs(['undo.k1=1']);
  await untilNode(bed.c, [host], 'undo-remove', (n) => n.status!.currentConfig === first && n.status!.state === 'Done');
  assert.ok(cmdline().includes('undo.k1=1'));

  writeFileSync(host.rebootFailMarker, '');
  const failed = await kargs([]);
  await untilNode(bed.c, [host], 'undo-remove', (n) => n.status!.lastUpdate?.toConfig === failed && n.status!.lastUpdate.result === 'Degraded' && n.status!.phase === 'reboot');
  assert.doesNotMatch(host.rpmOstree('kargs'), /undo\.k1=1/, 'staged without it, not booted');
  rmSync(host.rebootFailMarker);

  // The same arguments as the config the node is on, another file: no reboot.
  const same = await kargs(['undo.k1=1'], 'two');
  await untilNode(bed.c, [host], 'undo-remove', (n) => n.status!.currentConfig === same && n.status!.state === 'Done');
  assert.equal(host.reboots, 1);
  // One more argument: a reboot, into a deployment made from the pending one.
  const want = await kargs(['undo.k1=1', 'undo.k2=2'], 'two');
  // Its update over (Done, or Degraded had validation caught it): the record says which.
  const node = await untilNode(bed.c, [host], 'undo-remove', (n) => n.status!.lastUpdate?.toConfig === want);
  assert.equal(node.status!.lastUpdate!.result, 'Done', node.status!.lastUpdate!.reason);
  assert.ok(cmdline().includes('undo.k1=1') && cmdline().includes('undo.k2=2'), cmdline().join(' '));
});
