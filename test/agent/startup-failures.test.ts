// The agent never exits 0 silently and never starts from a guess: a bad config, an unreachable
// D-Bus and an unreadable journal each end the process non-zero with a message naming the file
// or address and what to do. A corrupt journal is moved aside and the agent recovers by checking
// the disk against the desired config, saying so in its log and in the node's reason.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parse, stringify } from 'yaml';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { canRunUserSystemd, startUserSystemd, type UserSystemd } from '../../sandbox/user-systemd.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let server: TestServer;
let c: Clients;
let systemd: UserSystemd;
let host: SandboxHost;
let target: string;

// A file without a policy: applying it again from scratch would reboot the node.
const config = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 50-startup, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  kernelArguments: [startup=1]
  config:
    ignition: {version: 3.4.0}
    storage: {files: [{path: /etc/startup.conf, contents: {source: "data:,converged"}}]}
`;

before(async () => {
  if (skip) return;
  server = await startTestServer();
  c = server.admin();
  systemd = await startUserSystemd();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'p', text: poolYaml('worker', '  maxUnavailable: 100%\n') }, { source: 'c', text: config }], dryRun: false }, 'apply');
  target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  host = new SandboxHost({ name: 'startup', server: server.address, pki: server.pki, systemd });
  await host.start();
  await untilNode(c, [host], 'startup', (n) => n.status!.currentConfig === target && n.status!.state === 'Done');
  await host.kill();
});
after(async () => {
  if (skip) return;
  await host.kill();
  await systemd.stop();
  await server.close();
});

/** Runs the agent with its config changed by `edit`, expecting it to exit by itself. */
async function exitsWith(edit: (cfg: Record<string, unknown>) => void): Promise<{ code: number | null; stderr: string }> {
  const original = readFileSync(host.configPath, 'utf8');
  const cfg = parse(original) as Record<string, unknown>;
  edit(cfg);
  writeFileSync(host.configPath, stringify(cfg));
  const from = host.logs.length;
  try {
    host.spawnAgent();
    const code = await host.exited(60_000);
    return { code, stderr: host.logs.slice(from).filter((l) => l.startsWith('stderr: ')).map((l) => l.slice(8)).join('\n') };
  } finally {
    writeFileSync(host.configPath, original);
  }
}

test('a bad config: exit 1 naming the file, the field and the rule', { skip }, async () => {
  const r = await exitsWith((cfg) => { cfg.logLevel = 'verbose'; });
  assert.equal(r.code, 1);
  assert.equal(r.stderr, `mcplane-agent: ${host.configPath}: logLevel: must be one of fatal, error, warn, info, debug, trace, silent (got "verbose")`);
});

test('an unreachable D-Bus: exit 1 naming the address and what to set', { skip }, async () => {
  const start = Date.now();
  const r = await exitsWith((cfg) => { cfg.systemdBus = 'unix:path=/run/mcplane-test-no-such/bus'; cfg.dbusTimeoutSeconds = 3; });
  assert.equal(r.code, 1);
  assert.ok(Date.now() - start < 30_000);
  assert.match(r.stderr, /^mcplane-agent: cannot reach systemd over D-Bus at unix:path=\/run\/mcplane-test-no-such\/bus: .*ENOENT.*\. Check that systemd is running there, or set systemdBus in the agent config/);
});

test('an unreadable journal: exit 1 naming the file and what to do; it is left as it is', { skip }, async () => {
  const journal = join(host.stateDir, 'journal.json');
  const saved = readFileSync(journal);
  rmSync(journal);
  mkdirSync(journal); // EISDIR on read, as an unreadable file would be
  try {
    const r = await exitsWith(() => undefined);
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`^mcplane-agent: cannot read the journal ${journal}: EISDIR.*; fix the file's type or permissions .*or move it aside to have the agent recover from the disk$`));
    assert.ok(existsSync(journal));
  } finally {
    rmSync(journal, { recursive: true });
    writeFileSync(journal, saved);
  }
});

test('a corrupt journal is moved aside; the agent checks the disk against the desired config, adopts it without a reboot and says so', { skip }, async () => {
  const journal = join(host.stateDir, 'journal.json');
  writeFileSync(journal, '{"version":1,"currentConfig":"rendered-wor'); // torn
  const reboots = host.reboots;
  host.spawnAgent();
  const node = await untilNode(c, [host], 'startup', (n) => n.status!.state === 'Done' && n.status!.reason.startsWith('recovered'));
  assert.equal(node.status!.currentConfig, target);
  const aside = readdirSync(host.stateDir).filter((f) => f.startsWith('journal.json.corrupt-'));
  assert.equal(aside.length, 1, 'the corrupt journal is kept, renamed with a timestamp');
  assert.match(aside[0]!, /^journal\.json\.corrupt-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$/);
  assert.equal(readFileSync(join(host.stateDir, aside[0]!), 'utf8'), '{"version":1,"currentConfig":"rendered-wor');
  assert.match(node.status!.reason, new RegExp(`^recovered from a corrupt journal \\(not JSON: .*\\), moved aside to ${join(host.stateDir, aside[0]!)}; the disk matches ${target}, adopted without changes$`));
  assert.equal(host.reboots, reboots, 'no reboot: nothing needed changing');
  assert.ok(host.logs.some((l) => l.includes('"msg":"the journal was corrupt and has been moved aside; the disk will be checked against the desired config"')));
  assert.ok(host.logs.some((l) => l.includes('"msg":"recovered from a corrupt journal: the disk matches the desired config; adopted it without changes"')));
  assert.equal(JSON.parse(readFileSync(journal, 'utf8')).currentConfig, target);
  await host.kill();
});

test('a corrupt journal on a host whose disk differs: the config is applied in full, and the reason says why', { skip }, async () => {
  const journal = join(host.stateDir, 'journal.json');
  for (const f of readdirSync(host.stateDir)) if (f.startsWith('journal.json.corrupt-')) rmSync(join(host.stateDir, f));
  writeFileSync(journal, 'null');
  writeFileSync(join(host.root, 'etc/startup.conf'), 'edited while the journal was lost');
  host.spawnAgent();
  const node = await untilNode(c, [host], 'startup', (n) => n.status!.currentConfig === target && n.status!.state === 'Done' && n.status!.reason.includes('applying it in full'));
  assert.match(node.status!.reason, /^recovered from a corrupt journal \(not an object\), moved aside to .*; the disk differed from rendered-worker-\w+ \(1 difference\), applying it in full$/);
  assert.equal(host.file('etc/startup.conf'), 'converged');
  await host.kill();
});
