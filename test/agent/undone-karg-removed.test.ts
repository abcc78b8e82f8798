// A kernel argument that an unfinished update removed (its reboot failed) is back when a new
// config that keeps it undoes that update: a later update's deployment still has it, and so does
// the command line that deployment boots. rpm-ostree builds every change on its pending
// deployment, so the undone update's staged deployment has to go (`rpm-ostree cleanup -p`), and
// each update's kernel arguments are computed against what the pending deployment really holds.
// (The model-based test found it: MCPLANE_MODEL_SEED=1515066152 and 680357874.)

import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { test } from 'node:test';
import { untilNode } from '../helpers/converge.ts';
import { failableRebootHost } from '../helpers/failable-reboot-host.ts';

const f = failableRebootHost('undo-remove', '  maxUnavailable: 100%\n  disruptionPolicy:\n    files: [{path: /etc/undo/, actions: [{type: none}]}]\n');
const { skip } = f.bed;
/** Applies 50-kargs with these kernel arguments (and a file, `motd`) and returns the pool's new target. */
const kargs = (args: string[], motd = 'one'): Promise<string> => f.applyKargsConfig(`  kernelArguments: [${args.join(', ')}]
  config:
    ignition: {version: 3.4.0}
    storage: {files: [{path: /etc/undo/motd, mode: 420, contents: {source: "data:,${motd}"}}]}
`);

test('a kernel argument that an update whose reboot failed removed is back on later deployments once a config that keeps it replaces that update', { skip }, async () => {
  const first = await kargs(['undo.k1=1']);
  await untilNode(f.bed.c, [f.host], 'undo-remove', (n) => n.status!.currentConfig === first && n.status!.state === 'Done');
  assert.ok(f.cmdline().includes('undo.k1=1'));

  writeFileSync(f.host.rebootFailMarker, '');
  const failed = await kargs([]);
  await untilNode(f.bed.c, [f.host], 'undo-remove', (n) => n.status!.lastUpdate?.toConfig === failed && n.status!.lastUpdate.result === 'Degraded' && n.status!.phase === 'reboot');
  assert.doesNotMatch(f.host.rpmOstree('kargs'), /undo\.k1=1/, 'staged without it, not booted');
  rmSync(f.host.rebootFailMarker);

  // The same arguments as the config the node is on, another file: no reboot.
  const same = await kargs(['undo.k1=1'], 'two');
  await untilNode(f.bed.c, [f.host], 'undo-remove', (n) => n.status!.currentConfig === same && n.status!.state === 'Done');
  assert.equal(f.host.reboots, 1);
  // One more argument: a reboot, into a deployment made from the pending one.
  const want = await kargs(['undo.k1=1', 'undo.k2=2'], 'two');
  // Its update over (Done, or Degraded had validation caught it): the record says which.
  const node = await untilNode(f.bed.c, [f.host], 'undo-remove', (n) => n.status!.lastUpdate?.toConfig === want);
  assert.equal(node.status!.lastUpdate!.result, 'Done', node.status!.lastUpdate!.reason);
  assert.ok(f.cmdline().includes('undo.k1=1') && f.cmdline().includes('undo.k2=2'), f.cmdline().join(' '));
});
