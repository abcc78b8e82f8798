// What a restart of demo.service (demoServiceConfig in manifests.ts) looks like from outside, for
// the tests that reach it by different policies (the pool's own in update-flow, the cluster's in
// cluster-disruption-policy): one definition, so both check the same outcome.

import assert from 'node:assert/strict';
import type { Clients } from '../../src/cli/client/connection.ts';
import type { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from './converge.ts';

/**
 * Runs `change` (which applies a new /etc/demo/motd and returns the pool's new target) on a host
 * whose demo.service is active, and asserts the node took it with a restart over D-Bus and no
 * reboot: Done on the target, lastDisruption the restart, the file's new text, the unit active
 * and entered again.
 */
export async function assertDemoRestartedWithoutReboot(c: Clients, host: SandboxHost, change: () => Promise<string>, motd: string): Promise<void> {
  const entered = () => host.systemd.systemctl('show', '-p', 'ActiveEnterTimestampMonotonic', 'demo.service').stdout;
  host.systemd.systemctl('start', 'demo.service');
  const before = entered();
  const want = await change();
  const node = await untilNode(c, [host], host.options.name, (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(host.reboots, 0, 'no reboot');
  assert.equal(node.status!.lastDisruption, 'restart demo.service');
  assert.equal(host.file('etc/demo/motd'), motd);
  assert.equal(host.systemd.systemctl('is-active', 'demo.service').stdout.trim(), 'active');
  assert.notEqual(entered(), before);
}
