// The core user's passwordHash must never be on a command line (readable by every local user in
// /proc/<pid>/cmdline). Recording stand-ins for chpasswd and usermod sit first on the agent's
// PATH: each writes down its argv and standard input, then runs the real tool on the sandbox root.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
const HASH = '$6$rounds=5000$pepper$Zq0tTCoFXU7CBY3nL0pVSecretHashValue';
let server: TestServer;
let c: Clients;
let host: SandboxHost | undefined;

const config = (hash?: string) => `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 50-password, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  config:
    ignition: {version: 3.4.0}
    passwd: {users: [{name: core${hash ? `, passwordHash: "${hash}"` : ''}}]}
    storage: {files: [{path: /etc/password-round, contents: {source: "data:,${hash ? 'set' : 'dropped'}"}}]}
`;

before(async () => {
  if (skip) return;
  server = await startTestServer();
  c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'p', text: poolYaml('worker', '  disruptionPolicy: {files: [{path: /etc/, actions: [{type: none}]}]}\n') }], dryRun: false }, 'apply');
});
after(async () => {
  if (skip) return;
  await host?.stop();
  await server.close();
});

test('the password hash reaches /etc/shadow through standard input, never through any command line', { skip }, async () => {
  const bin = mkdtempSync(join(tmpdir(), 'mcplane-recorder-'));
  const argvLog = join(bin, 'argv.log');
  const stdinLog = join(bin, 'stdin.log');
  for (const tool of ['chpasswd', 'usermod']) {
    writeFileSync(join(bin, tool), `#!/bin/sh
# STAND-IN (recorder) for ${tool}: notes its argv and standard input, then runs the real tool.
printf '%s\\n' "${tool} $*" >> ${argvLog}
${tool === 'chpasswd' ? `tee -a ${stdinLog} | /usr/sbin/chpasswd "$@"` : 'exec /usr/sbin/usermod "$@" </dev/null'}
`, { mode: 0o755 });
  }
  host = new SandboxHost({ name: 'password', server: server.address, pki: server.pki });
  const converge = async (text: string) => {
    await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'c', text }], dryRun: false }, 'apply');
    const want = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
    await untilNode(c, [host!], 'password', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  };
  const shadow = () => readFileSync(join(host!.root, 'etc/shadow'), 'utf8').split('\n').find((l) => l.startsWith('core:'))!.split(':')[1];

  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'c', text: config(HASH) }], dryRun: false }, 'apply');
  await host.start({ PATH: `${bin}:${process.env.PATH}` });
  await converge(config(HASH));
  assert.equal(shadow(), HASH, 'the hash is in /etc/shadow');
  await converge(config());
  assert.equal(shadow(), '*', 'dropping the hash locks password login');

  const argv = readFileSync(argvLog, 'utf8').trim().split('\n');
  assert.ok(argv.length >= 2, `the tool ran for both changes: ${argv.join(' | ')}`);
  for (const line of argv) {
    assert.ok(!line.includes(HASH) && !line.includes('pepper'), `no hash on the command line: ${line}`);
  }
  assert.deepEqual(argv.map((l) => l.split(' ')[0]), ['chpasswd', 'chpasswd']);
  assert.equal(readFileSync(stdinLog, 'utf8'), `core:${HASH}\ncore:*\n`, 'the hash went in on standard input');
});
