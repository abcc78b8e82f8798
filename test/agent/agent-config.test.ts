import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadAgentConfig, parseAgentConfig } from '../../src/agent/agent-config.ts';

const minimal = { server: 'mcplane:7443', tls: { ca: '/a', cert: '/b', key: '/c' }, nodeName: 'n1' };

test('defaults are a real CoreOS host\'s paths; a root moves them all', () => {
  const c = parseAgentConfig(minimal);
  assert.deepEqual(c.paths, { root: '/', unitDir: '/etc/systemd/system', stateDir: '/var/lib/mcplane', sshKeysDir: '/home/core/.ssh/authorized_keys.d', bootIdFile: '/proc/sys/kernel/random/boot_id', kernelCmdlineFile: '/proc/cmdline' });
  assert.deepEqual(c.reboot, { method: 'logind' });
  assert.equal(c.systemdBus, 'system');
  assert.equal(c.rpmOstree, 'rpm-ostree');
  const moved = parseAgentConfig({ ...minimal, paths: { root: '/tmp/r' } });
  assert.equal(moved.paths.unitDir, '/tmp/r/etc/systemd/system');
  assert.equal(moved.paths.stateDir, '/tmp/r/var/lib/mcplane');
});

test('bad configs name the field and the rule', () => {
  const cases: [unknown, RegExp][] = [
    [{ ...minimal, server: 'nope' }, /server: required, HOST:PORT/],
    [{ server: 'a:1', nodeName: 'n' }, /tls: required/],
    [{ ...minimal, tls: { ca: '/a' } }, /tls.cert: must be a non-empty string|tls: ca, cert and key are all required/],
    [{ ...minimal, nodeName: 'Bad_Name' }, /nodeName: "Bad_Name" is not a DNS subdomain/],
    [{ ...minimal, reboot: { method: 'command' } }, /reboot.command: a non-empty list/],
    [{ ...minimal, reboot: { method: 'kexec' } }, /reboot.method: must be logind or command/],
    [{ ...minimal, drift: { intervalSeconds: -1 } }, /drift.intervalSeconds: must be a positive number/],
    [{ ...minimal, serverAddress: 'x' }, /serverAddress: unknown field/],
    [{ ...minimal, labels: { a: 1 } }, /labels.a: label values must be strings/],
    [[], /must be a mapping/],
  ];
  for (const [raw, message] of cases) assert.throws(() => parseAgentConfig(raw, 'agent.yaml'), message, JSON.stringify(raw));
});

test('the file must exist and be YAML', () => {
  assert.throws(() => loadAgentConfig('/no/such/agent.yaml'), /cannot read agent config \/no\/such\/agent\.yaml/);
  const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
  writeFileSync(join(dir, 'a.yaml'), 'server: [unclosed');
  assert.throws(() => loadAgentConfig(join(dir, 'a.yaml')), /not valid YAML/);
});

test('drop-ins in agent.yaml.d merge over agent.yaml in name order; --root resolves host paths under it', () => {
  const root = mkdtempSync(join(tmpdir(), 'cfg-root-'));
  mkdirSync(join(root, 'etc/mcplane/agent.yaml.d'), { recursive: true });
  writeFileSync(join(root, 'etc/mcplane/agent.yaml'), 'server: a:1\ntls: {ca: /etc/mcplane/pki/ca.crt, cert: /etc/mcplane/pki/node.crt, key: /etc/mcplane/pki/node.key}\nlabels: {role: x}\nnodeName: n\n');
  writeFileSync(join(root, 'etc/mcplane/agent.yaml.d/10-site.yaml'), 'labels: {zone: z1}\nheartbeatSeconds: 7\n');
  writeFileSync(join(root, 'etc/mcplane/agent.yaml.d/20-later.yaml'), 'heartbeatSeconds: 9\n');
  const c = loadAgentConfig(undefined, root);
  assert.deepEqual(c.labels, { role: 'x', zone: 'z1' });
  assert.equal(c.heartbeatSeconds, 9);
  assert.equal(c.tls!.ca, join(root, 'etc/mcplane/pki/ca.crt'));
  assert.equal(c.paths.root, root);
  assert.equal(c.paths.stateDir, join(root, 'var/lib/mcplane'));
});

test('--root moves every path the config names (state, units, SSH keys, boot id, TLS, token), not the programs it runs', () => {
  const c = parseAgentConfig({
    ...minimal,
    tls: { ca: '/etc/mcplane/ca.crt', cert: '/etc/mcplane/node.crt', key: '/etc/mcplane/node.key' },
    enrollment: { url: 'https://mcplane:22623', tokenFile: '/etc/mcplane/token' },
    paths: { stateDir: '/var/lib/alt', unitDir: '/etc/systemd/alt', sshKeysDir: '/var/home/core/.ssh/authorized_keys.d', bootIdFile: '/run/boot_id', kernelCmdlineFile: '/run/cmdline' },
    rpmOstree: '/usr/bin/rpm-ostree',
    reboot: { method: 'command', command: ['/usr/bin/systemctl', 'reboot'] },
  }, 'agent.yaml', '/img');
  assert.deepEqual(c.paths, { root: '/img', stateDir: '/img/var/lib/alt', unitDir: '/img/etc/systemd/alt', sshKeysDir: '/img/var/home/core/.ssh/authorized_keys.d', bootIdFile: '/img/run/boot_id', kernelCmdlineFile: '/img/run/cmdline' });
  assert.deepEqual(c.tls, { ca: '/img/etc/mcplane/ca.crt', cert: '/img/etc/mcplane/node.crt', key: '/img/etc/mcplane/node.key' });
  assert.deepEqual(c.enrollment, { url: 'https://mcplane:22623', tokenFile: '/img/etc/mcplane/token' });
  assert.equal(c.rpmOstree, '/usr/bin/rpm-ostree');
  assert.deepEqual(c.reboot, { method: 'command', command: ['/usr/bin/systemctl', 'reboot'] });
  // The running kernel's boot id and command line unless the config names files; paths.root moves too.
  assert.equal(parseAgentConfig({ ...minimal, paths: { root: '/sysroot' } }, 'a', '/img').paths.bootIdFile, '/proc/sys/kernel/random/boot_id');
  assert.equal(parseAgentConfig({ ...minimal, paths: { root: '/sysroot' } }, 'a', '/img').paths.kernelCmdlineFile, '/proc/cmdline');
  assert.equal(parseAgentConfig({ ...minimal, paths: { root: '/sysroot' } }, 'a', '/img').paths.root, '/img/sysroot');
  assert.throws(() => parseAgentConfig({ ...minimal, paths: { stateDir: 'relative' } }, 'agent.yaml'), /agent.yaml: paths.stateDir: must be an absolute path/);
  assert.throws(() => parseAgentConfig({ ...minimal, paths: { stateDirectory: '/x' } }, 'agent.yaml'), /paths.stateDirectory: unknown field/);
});

test('several control plane addresses: server "a:1,b:2" or servers: [..]; server: a:1 still works', () => {
  assert.deepEqual(parseAgentConfig(minimal).servers, ['mcplane:7443']);
  assert.deepEqual(parseAgentConfig({ ...minimal, server: 'a:7443, b:7443,c:1' }).servers, ['a:7443', 'b:7443', 'c:1']);
  const { server: _omit, ...rest } = minimal;
  const listed = parseAgentConfig({ ...rest, servers: ['a:7443', '[::1]:7443'] });
  assert.deepEqual(listed.servers, ['a:7443', '[::1]:7443']);
  assert.equal(listed.server, 'a:7443,[::1]:7443');
  const cases: [unknown, RegExp][] = [
    [{ ...minimal, server: 'a:1,b' }, /agent.yaml: server: entry 2 "b" is not HOST:PORT/],
    [{ ...minimal, servers: ['a:1'] }, /agent.yaml: servers: give server or servers, not both/],
    [{ ...rest, servers: [] }, /agent.yaml: servers: required, HOST:PORT/],
    [{ ...rest, servers: ['a:1', 7] }, /agent.yaml: servers\[1\]: 7 is not HOST:PORT/],
  ];
  for (const [raw, message] of cases) assert.throws(() => parseAgentConfig(raw, 'agent.yaml'), message, JSON.stringify(raw));
});

test('enrollment: a token file, or a pool to ask to join; never both, never neither, and an https URL', () => {
  const tls = { ca: '/etc/mcplane/ca.crt', cert: '/etc/mcplane/node.crt', key: '/etc/mcplane/node.key' };
  const url = 'https://mcplane.example.com:22623/enrollment-requests';
  assert.deepEqual(parseAgentConfig({ ...minimal, tls, enrollment: { url, pool: 'worker' } }, 'agent.yaml').enrollment, { url, pool: 'worker', pollSeconds: 10 });
  assert.deepEqual(parseAgentConfig({ ...minimal, tls, enrollment: { url, pool: 'worker', pollSeconds: 2 } }, 'agent.yaml').enrollment, { url, pool: 'worker', pollSeconds: 2 });
  const bad = (enrollment: unknown) => () => parseAgentConfig({ ...minimal, tls, enrollment }, 'agent.yaml');
  assert.throws(bad({ url, pool: 'worker', tokenFile: '/t' }), /agent\.yaml: enrollment: give tokenFile .* or pool .*, one of them/);
  assert.throws(bad({ url }), /enrollment: give tokenFile/);
  assert.throws(bad({ url: 'http://mcplane:22623/enroll', tokenFile: '/t' }), /enrollment\.url: required: the bootstrap endpoint, https:/);
  assert.throws(bad({ pool: 'worker' }), /enrollment\.url: required/);
  assert.throws(bad({ url, pool: 'worker', labels: {} }), /enrollment\.labels: unknown field \(expected one of: url, tokenFile, pool, pollSeconds\)/);
  assert.throws(bad({ url, tokenFile: '/t', pollSeconds: 2 }), /enrollment\.pollSeconds: only with pool/);
  assert.throws(bad({ url, pool: 'worker', pollSeconds: 0 }), /enrollment\.pollSeconds: must be a positive number/);
  assert.throws(bad({ url, pool: 'worker', pollSeconds: 3_000_000 }), /enrollment\.pollSeconds: must be between 0\.1 and 300/);
  assert.throws(bad({ url, pool: 'Worker Pool' }), /enrollment\.pool: "Worker Pool" is not a pool name/);
});

test('the pinned image sets\' CRI socket and room check: CRI-O\'s socket and MCO\'s 10 GiB by default; bad values name the key and the rule', () => {
  const c = parseAgentConfig(minimal);
  assert.equal(c.criSocket, '/var/run/crio/crio.sock');
  assert.deepEqual(c.pinnedImages, { minFreeBytes: 10 * 1024 ** 3, imageSizeBytes: 1024 ** 3, retrySeconds: 300 });
  const set = parseAgentConfig({ ...minimal, criSocket: '/run/containerd/containerd.sock', pinnedImages: { minFreeBytes: 0, imageSizeBytes: 4096 } }, 'a', '/img');
  // The runtime runs on this machine: its socket does not move under --root.
  assert.equal(set.criSocket, '/run/containerd/containerd.sock');
  assert.deepEqual(set.pinnedImages, { minFreeBytes: 0, imageSizeBytes: 4096, retrySeconds: 300 });
  const cases: [unknown, RegExp][] = [
    [{ ...minimal, criSocket: 'crio.sock' }, /agent.yaml: criSocket: must be the absolute path of the runtime's CRI socket/],
    [{ ...minimal, pinnedImages: { minFreeBytes: -1 } }, /agent.yaml: pinnedImages.minFreeBytes: must be a whole number of at least 0 \(got -1\)/],
    [{ ...minimal, pinnedImages: { imageSizeBytes: '1Gi' } }, /pinnedImages.imageSizeBytes: must be a whole number of at least 1/],
    [{ ...minimal, pinnedImages: { minFree: 1 } }, /pinnedImages.minFree: unknown field \(expected one of: minFreeBytes, imageSizeBytes, retrySeconds\)/],
    [{ ...minimal, pinnedImages: [] }, /pinnedImages: must be a mapping/],
  ];
  for (const [raw, message] of cases) assert.throws(() => parseAgentConfig(raw, 'agent.yaml'), message, JSON.stringify(raw));
});
