// The whole update flow against a real control plane (mTLS gRPC), a real systemd user manager
// over D-Bus, the rpm-ostree stand-in and the reboot stand-in.

import assert from 'node:assert/strict';
import { readFileSync, statSync, lstatSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestFn, type TestOptions } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { assertDemoRestartedWithoutReboot } from '../helpers/demo-service-checks.ts';
import { demoServiceConfig, mcYaml, poolYaml } from '../helpers/manifests.ts';
import { sandboxFixture } from '../helpers/sandbox-fixture.ts';

let host: SandboxHost;
const { skip, server, c, hosts, apply, target } = sandboxFixture({
  setUp: async () => { hosts.push(host = new SandboxHost({ name: 'host-a', server: server.address, pki: server.pki })); },
});

const pool = poolYaml('worker', `  disruptionPolicy:
    files:
      - {path: /etc/demo/, actions: [{type: restart, unit: demo.service}]}
    units:
      - {name: demo.service, actions: [{type: daemon-reload}, {type: restart, unit: demo.service}]}
`);
const config = (motd: string, extra = '') => demoServiceConfig(motd, { mode: '0640', sshKey: 'ssh-ed25519 AAAA demo', tail: extra });

// The etcd pass (scripts/test.sh) is here for the store's part of an update: the assignment
// rendered and sent from an etcd-backed server, the status and its reboots stored, a reapply
// written and acted on. The first three tests and the drift test (reapply) cover that on etcd; the
// others differ only in what the agent does on the host, where the store plays no part, so they run
// on SQLite alone (about half of the etcd pass's CPU). Each test leaves the host on a Done config,
// so the etcd pass runs the same tests in the same order, less these (not registered there, as
// model-based.test.ts does: a skipped test fails the run).
const hostOnly = (name: string, options: TestOptions, fn: TestFn): void => {
  if (process.env.MCPLANE_TEST_STORE !== 'etcd') test(name, options, fn);
};

test('a new host takes its pool config: files, unit, SSH keys; the pool policy covers them, so no reboot', { skip }, async () => {
  await apply(pool);
  await apply(config('hello'));
  await host.start();
  const want = await target();
  const node = await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(node.status!.phase, 'done');
  assert.equal(node.status!.lastDisruption, 'daemon-reload, restart demo.service');
  assert.equal(host.reboots, 0);
  assert.equal(host.file('etc/demo/motd'), 'hello');
  assert.equal(statSync(join(host.root, 'etc/demo/motd')).mode & 0o777, 0o640);
  const keys = join(host.root, 'home/core/.ssh/authorized_keys.d/ignition');
  assert.equal(readFileSync(keys, 'utf8'), 'ssh-ed25519 AAAA demo\n');
  assert.equal(statSync(keys).mode & 0o777, 0o600);
  assert.equal(statSync(join(host.root, 'home/core/.ssh/authorized_keys.d')).mode & 0o777, 0o700);
  assert.equal(host.systemd.systemctl('is-enabled', 'demo.service').stdout.trim(), 'enabled');
  assert.equal(node.status!.os!.kernelType, 'default');
});

test('a file under a restart policy changes without a reboot; the unit is restarted over D-Bus', { skip }, async () => {
  await assertDemoRestartedWithoutReboot(c, host, async () => {
    await apply(config('changed'));
    return target();
  }, 'changed');
});

test('kernel arguments and kernel type go through rpm-ostree and need a reboot; validation reads the booted deployment', { skip }, async () => {
  await apply(config('changed', '  kernelArguments: [selinux=0, hugepages=32]\n  kernelType: realtime\n'));
  const want = await target();
  const node = await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(host.reboots, 1);
  assert.match(node.status!.lastDisruption, /^reboot: kernelArguments changed; kernelType changed$/);
  assert.deepEqual(node.status!.os!.kernelArguments.slice(-2), ['selinux=0', 'hugepages=32']);
  assert.equal(node.status!.os!.kernelType, 'realtime');
  const calls: string[] = JSON.parse(readFileSync(host.standinState, 'utf8')).calls;
  assert.ok(calls.some((x) => x === 'kargs --append-if-missing=selinux=0 --append-if-missing=hugepages=32'), calls.join('\n'));
  assert.ok(calls.some((x) => x.startsWith('override remove kernel kernel-core') && x.includes('--install kernel-rt-core')));

  // Removing the config deletes the karg again (delete-if-present) and goes back to the default kernel.
  await apply(config('changed'));
  const back = await target();
  const node2 = await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === back && n.status!.state === 'Done');
  assert.equal(host.reboots, 2);
  assert.ok(!node2.status!.os!.kernelArguments.includes('selinux=0'));
  assert.equal(node2.status!.os!.kernelType, 'default');
  const calls2: string[] = JSON.parse(readFileSync(host.standinState, 'utf8')).calls;
  assert.ok(calls2.some((x) => x.includes('--delete-if-present=selinux=0')));
});

hostOnly('a file taken over is backed up and restored when no config manages it; a new file is deleted', { skip }, async () => {
  const { writeFileSync } = await import('node:fs');
  writeFileSync(join(host.root, 'etc/original.conf'), 'the distribution default\n', { mode: 0o644 });
  const takeover = mcYaml('60-takeover', 'worker', `  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - {path: /etc/original.conf, contents: {source: "data:,managed"}}
        - {path: /usr/local/bin/tool, mode: 0755, contents: {source: "data:,%23!/bin/sh"}}
`);
  await apply(takeover);
  let want = await target();
  await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(host.file('etc/original.conf'), 'managed');
  assert.equal(host.file('var/usrlocal/bin/tool'), '#!/bin/sh', '/usr/local resolves into /var');
  assert.equal(statSync(join(host.root, 'var/usrlocal/bin/tool')).mode & 0o777, 0o755);
  assert.ok(lstatSync(join(host.root, 'usr/local')).isSymbolicLink() && readlinkSync(join(host.root, 'usr/local')) === '../var/usrlocal');

  await call(c, c.config.delete.bind(c.config), { kind: 'MachineConfig', name: '60-takeover' }, 'delete');
  want = await target();
  await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(host.file('etc/original.conf'), 'the distribution default\n');
  assert.equal(host.file('var/usrlocal/bin/tool'), undefined);
});

hostOnly('a masked unit: stopped, then masked through D-Bus; systemd reports it masked', { skip }, async () => {
  host.systemd.systemctl('start', 'demo.service');
  await apply(config('changed', '').replace('        - name: demo.service\n          enabled: true', '        - name: demo.service\n          mask: true'));
  const want = await target();
  await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(host.systemd.systemctl('is-enabled', 'demo.service').stdout.trim(), 'masked');
  assert.equal(host.systemd.systemctl('is-active', 'demo.service').stdout.trim(), 'inactive');
  await apply(config('changed'));
  const back = await target();
  await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === back && n.status!.state === 'Done');
  assert.equal(host.systemd.systemctl('is-enabled', 'demo.service').stdout.trim(), 'enabled');
});

hostOnly('a reboot that comes back on the old deployment: the karg pending in rpm-ostree but not booted fails validation, naming the exact mismatch; a forced re-apply recovers', { skip }, async () => {
  host.bootStaged = false;
  await apply(config('changed', '  kernelArguments: [validate=me]\n'));
  const want = await target();
  const node = await untilNode(c, [host], 'host-a', (n) => n.status!.state === 'Degraded');
  assert.equal(node.status!.phase, 'validate');
  // `rpm-ostree kargs` prints the pending deployment's: it has the karg; the booted kernel does not.
  assert.ok(host.rpmOstree('kargs').split(' ').map((k) => k.trim()).includes('validate=me'));
  assert.ok(!readFileSync(host.cmdlineFile, 'utf8').includes('validate=me'));
  assert.ok(!node.status!.os!.kernelArguments.includes('validate=me'), 'the node reports the booted kernel arguments');
  assert.equal(node.status!.reason, `validate: ${want}: kernelArguments: validate=me is not on the booted kernel command line (${host.cmdlineFile}); rpm-ostree has it only in the pending deployment, so the host has not booted into it`);
  assert.notEqual(node.status!.currentConfig, want, 'currentConfig does not advance');
  host.bootStaged = true;
  await call(c, c.config.reapplyNode.bind(c.config), { name: 'host-a' }, 'reapply');
  const healed = await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.ok(healed.status!.os!.kernelArguments.includes('validate=me'));
});

hostOnly('the core password hash is set with chpasswd -e, without a reboot; dropping it locks password login', { skip }, async () => {
  await apply(config('changed')); // back to the baseline (drops the previous test's kernel argument)
  const base = await target();
  await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === base && n.status!.state === 'Done');
  const reboots = host.reboots;
  const withHash = config('changed').replace('    passwd: {users: [{name: core, sshAuthorizedKeys: ["ssh-ed25519 AAAA demo"]}]}', '    passwd: {users: [{name: core, sshAuthorizedKeys: ["ssh-ed25519 AAAA demo"], passwordHash: "$6$salt$hashvalue"}]}');
  await apply(withHash);
  let want = await target();
  await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  const shadow = () => readFileSync(join(host.root, 'etc/shadow'), 'utf8').split('\n').find((l) => l.startsWith('core:'))!.split(':')[1];
  assert.equal(shadow(), '$6$salt$hashvalue');
  assert.equal(host.reboots, reboots, 'no reboot for a password change');
  await apply(config('changed'));
  want = await target();
  await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(shadow(), '*');
});

test('a unit disabled behind the agent\'s back is drift naming the unit and both states', { skip }, async () => {
  host.systemd.systemctl('disable', 'demo.service');
  const node = await untilNode(c, [host], 'host-a', (n) => n.status!.state === 'Degraded', 10_000);
  assert.equal(node.status!.phase, 'drift');
  assert.equal(node.status!.reason, 'drift: unit demo.service changed outside the agent (expected enabled, systemd says disabled)');
  assert.deepEqual(node.status!.drift.map((d) => [d.kind, d.path, d.expectedHash, d.actualHash]), [['unit', 'demo.service', 'enabled', 'disabled']]);
  await call(c, c.config.reapplyNode.bind(c.config), { name: 'host-a' }, 'reapply');
  await untilNode(c, [host], 'host-a', (n) => n.status!.state === 'Done' && n.status!.drift.length === 0, 20_000);
  assert.equal(host.systemd.systemctl('is-enabled', 'demo.service').stdout.trim(), 'enabled');
});
