// npm run demo: a control plane and three hosts on this machine, bootstrapped the way real ones
// are, then a rolling update you can watch. Every host is a real mcplane-agent process with its
// own temporary root, its own systemd user manager, and the rpm-ostree and reboot stand-ins.
// Ctrl-C (or the end) stops every process and removes every directory the demo made, within
// five seconds.

import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call } from '../src/cli/client/call.ts';
import { connect, type Clients } from '../src/cli/client/connection.ts';
import { pkiInitCommand } from '../src/cli/commands/pki.ts';
import { staticTokenFor } from '../src/controlplane/api/bootstrap-tokens.ts';
import { startServer, type ServerHandle } from '../src/controlplane/server.ts';
import { createLogger } from '../src/runtime/logger.ts';
import { silenceIpServernameWarning } from '../src/runtime/process-warnings.ts';
import type { WatchEvent__Output } from '../src/runtime/generated/mcplane/v1/WatchEvent.ts';
import { applyIgnitionFiles, fetchIgnition } from '../sandbox/ignition-files.ts';
import { SandboxHost } from '../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../sandbox/user-systemd.ts';

const ROOT = join(import.meta.dirname, '..');
const HOSTS = [
  { name: 'worker-a', pool: 'worker' },
  { name: 'worker-b', pool: 'worker' },
  { name: 'infra-a', pool: 'infra' },
];
const CHANGE = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 80-demo-banner
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - path: /etc/mcplane-demo/banner
          mode: 0644
          contents: {source: "data:,rolled%20out%20by%20mcplane%0A"}
`;

const bold = (s: string): string => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
const dim = (s: string): string => (process.stdout.isTTY ? `\x1b[2m${s}\x1b[0m` : s);
const short = (config: string): string => (config ? config.replace(/^rendered-(\w+)-(\w{8})\w*$/, 'rendered-$1-$2…') : '<none>');
const time = (): string => new Date().toISOString().slice(11, 19);
/** Once interrupted, the demo only reports its own shutdown. */
const say = (line: string): void => { if (!interrupted) process.stdout.write(`${line}\n`); };
/** The columns of the progress lines, shared by the header and the lines. */
const row = (t: string, node: string, state: string, phase: string, rest: string): string => `   ${t.padEnd(8)}  ${node.padEnd(9)} ${state.padEnd(8)} ${phase.padEnd(9)} ${rest}`;

let dir = '';
let server: ServerHandle | undefined;
let clients: Clients | undefined;
const hosts: SandboxHost[] = [];
/** Hosts starting or "rebooting" (a new agent process); cleanup waits for them, or one could outlive it. */
const inFlight: Promise<unknown>[] = [];
let interrupted = false;
let cleaning: Promise<void> | undefined;

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    clients?.close();
    await Promise.allSettled(inFlight);
    // In parallel: each host's agent gets SIGTERM (SIGKILL half a second later: its journal
    // makes that safe) and its systemd `exit`, which take about a second together; one after
    // another they would not fit in the five seconds Ctrl-C allows.
    await Promise.allSettled(hosts.map((h) => h.stop(500)));
    await server?.close(1000).catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  })();
  return cleaning;
}

async function main(): Promise<void> {
  silenceIpServernameWarning();
  if (!canRunUserSystemd()) {
    say('The demo gives each host its own systemd user manager in a private mount namespace,');
    say('which needs root (and unshare). Run it as root, e.g.: sudo npm run demo');
    process.exitCode = 2;
    return;
  }
  process.on('SIGINT', () => {
    // Ctrl-C reaches the whole process group: the agents and their systemd managers get it too.
    if (interrupted) return; // a second Ctrl-C must not cut the cleanup short
    interrupted = true;
    process.stdout.write('\ninterrupted: stopping every process and removing the demo\'s directories\n');
    void cleanup().then(() => process.exit(130));
  });
  dir = mkdtempSync(join(tmpdir(), 'mcplane-demo-'));
  // Everything the demo makes goes under its one directory: each host's root (with its node key),
  // its systemd's runtime and config directories, the agents' temporary files. The sandbox
  // creates those with os.tmpdir(), which reads TMPDIR at each call; child processes inherit it.
  process.env.TMPDIR = join(dir, 'tmp');
  mkdirSync(process.env.TMPDIR);

  say(bold('1. A control plane'));
  await pkiInitCommand(join(dir, 'pki'), [], []);
  server = await startServer({
    dataDir: join(dir, 'data'),
    listen: '127.0.0.1:0',
    tls: { ca: join(dir, 'pki/ca.crt'), cert: join(dir, 'pki/server.crt'), key: join(dir, 'pki/server.key') },
    bootstrap: { listen: '127.0.0.1:0', caKeyFile: join(dir, 'pki/ca.key'), tokenFile: join(dir, 'pki/bootstrap-token') },
    metrics: { listen: '127.0.0.1:0' },
    log: createLogger({ write: () => undefined }),
  });
  const address = `127.0.0.1:${server.grpcPort}`;
  clients = connect({ server: address, pkiDir: join(dir, 'pki'), config: '/dev/null' });
  const c = clients;
  say(`   mcplane-server on ${address} (gRPC, mutual TLS), bootstrap endpoint on 127.0.0.1:${server.bootstrapPort}, store in ${dir}/data`);
  say(`   live view in a browser while the demo runs (from another terminal): npm run -s mcctl -- --server ${address} --pki-dir ${dir}/pki dashboard`);
  say(`   Prometheus metrics while the demo runs: curl -s http://127.0.0.1:${server.metricsPort}/metrics | grep -E '^(mco|mcplane)_'`);
  const manifests = readdirSync(join(ROOT, 'examples')).filter((f) => f.endsWith('.yaml')).sort()
    .map((f) => ({ source: f, text: readFileSync(join(ROOT, 'examples', f), 'utf8') }));
  const applied = await call(c, c.config.apply.bind(c.config), { manifests, dryRun: false }, 'apply the examples');
  const shortKind: Record<string, string> = { MachineConfig: 'mc', MachineConfigPool: 'mcp', MachineConfiguration: 'machineconfiguration' };
  say(`   mcctl apply -f examples/: ${applied.objects.map((o) => `${shortKind[o.kind] ?? o.kind}/${o.name}`).join(', ')}`);

  say(bold('\n2. Three hosts boot from the bootstrap endpoint, enroll, and join their pools'));
  say(dim('   Each line below is a change the control plane streams as it happens (StatusService.Watch, as'));
  say(dim('   `mcctl watch` shows it): a node\'s STATE (Working, Done, Degraded), its PHASE in the update'));
  say(dim('   (check, diff, plan, apply, actions or reboot, validate, done), its current rendered config'));
  say(dim('   -> the one it is moving to, and a reason when there is one; "pool" lines count a pool\'s progress.'));
  say(dim('   New hosts skip the queue: a host with no config yet serves nothing, so it gets its pool\'s'));
  say(dim('   config at once without using maxUnavailable; both workers update together here. Step 3 queues.'));
  say(row('TIME', 'NODE', 'STATE', 'PHASE', 'CURRENT -> DESIRED CONFIG  REASON'));
  const stopWatch = watch(c);
  // A bootstrap token serves one pool: worker's from the file `mcctl pki init` wrote, infra's
  // made as an operator would (mcctl pki token create --pool infra --ttl 1h).
  const tokens = new Map<string, string>([['worker', staticTokenFor(readFileSync(join(dir, 'pki/bootstrap-token'), 'utf8'), 'worker')]]);
  const infraToken = await call(c, c.identity.createBootstrapToken.bind(c.identity), { pool: 'infra', ttlMs: 3_600_000, description: 'demo' }, 'create a bootstrap token');
  tokens.set('infra', infraToken.token);
  for (const h of HOSTS) {
    const ignition = await fetchIgnition({ port: server.bootstrapPort!, ca: readFileSync(join(dir, 'pki/ca.crt')), token: tokens.get(h.pool)! }, h.pool);
    if (interrupted) return;
    const host = new SandboxHost({ name: h.name, server: address });
    const files = applyIgnitionFiles(ignition, host.root);
    hosts.push(host);
    say(dim(`   ${h.name}: GET /config/${h.pool} (${h.pool}'s bootstrap token) -> Ignition ${ignition.ignition.version}, ${files.length} files; starting mcplane-agent`));
    const started = host.startFromRoot();
    inFlight.push(started);
    await started;
  }
  await untilUpdated(c, ['worker', 'infra']);

  say(bold('\n3. A change to the worker pool rolls out one node at a time (maxUnavailable: 1)'));
  say(dim('   mcctl apply -f 80-demo-banner.yaml (a file under /etc/mcplane-demo/: the cluster disruption policy,'));
  say(dim('   machineconfiguration/cluster, restarts a unit instead of rebooting, in every pool, infra too)'));
  say(dim('   Both workers have a config now, so they take turns: the second waits until the first is Done. The'));
  say(dim('   infra pool takes worker configs too and has its own maxUnavailable, so infra-a moves meanwhile.'));
  say(row('TIME', 'NODE', 'STATE', 'PHASE', 'CURRENT -> DESIRED CONFIG  REASON'));
  const rebootsBefore = hosts.map((h) => h.reboots);
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: '80-demo-banner.yaml', text: CHANGE }], dryRun: false }, 'apply the change');
  await untilUpdated(c, ['worker', 'infra']);
  stopWatch();
  // Said from what happened, not from what was meant to happen.
  const rebooted = hosts.filter((h, i) => h.reboots > rebootsBefore[i]!).map((h) => h.options.name);
  say(rebooted.length === 0
    ? `   the change reached every host without a reboot (${hosts.map((h) => h.options.name).join(', ')})`
    : bold(`   rebooted for the change: ${rebooted.join(', ')}`));

  say(bold('\n4. Where everything ended'));
  const { pools } = await call(c, c.status.listPools.bind(c.status), {}, 'list pools');
  for (const p of pools) {
    const s = p.status!;
    const cond = (t: string): string => s.conditions.find((x) => x.type === t)?.status ?? '?';
    say(`   pool ${p.name.padEnd(7)} ${short(s.configuration)}  machines ${s.machineCount}, updated ${s.updatedMachineCount}, degraded ${s.degradedMachineCount}  Updated=${cond('Updated')} Updating=${cond('Updating')} Degraded=${cond('Degraded')}`);
  }
  say('');
  for (const host of hosts) {
    const node = await call(c, c.status.getNode.bind(c.status), { name: host.options.name }, 'get node');
    const rendered = await call(c, c.config.getRenderedConfig.bind(c.config), { name: node.status!.currentConfig }, 'get rendered');
    const spec = JSON.parse(rendered.specJson);
    const os = node.status!.os!;
    const ostreeCalls: string[] = JSON.parse(readFileSync(host.standinState, 'utf8')).calls.filter((x: string) => !x.startsWith('status') && x !== 'kargs');
    say(bold(`   ${host.options.name}`) + `  pool ${node.pool}, ${short(node.status!.currentConfig)}, ${node.status!.state}, ${host.reboots} reboot${host.reboots === 1 ? '' : 's'}`);
    say(`     files       ${spec.config.storage.files.map((f: { path: string }) => f.path).join(', ') || '<none>'}`);
    say(`     units       ${spec.config.systemd.units.map((u: { name: string; enabled?: boolean }) => `${u.name}${u.enabled ? ' (enabled)' : ''}`).join(', ') || '<none>'}`);
    say(`     ssh keys    ${(spec.config.passwd.users[0]?.sshAuthorizedKeys ?? []).length} for core`);
    say(`     kernel      ${os.kernelType}, arguments: ${os.kernelArguments.join(' ')}`);
    say(`     rpm-ostree  ${ostreeCalls.join(' | ') || '<nothing>'}`);
    say(`     last change ${node.status!.lastDisruption || '<none>'}`);
    // The history is stored when the agent reports the update finished, alongside its status.
    let updates = (await call(c, c.status.getNodeHistory.bind(c.status), { name: host.options.name }, 'get node history')).updates;
    for (let i = 0; i < 20 && updates.at(-1)?.toConfig !== node.status!.currentConfig; i++) {
      await new Promise((r) => setTimeout(r, 100));
      updates = (await call(c, c.status.getNodeHistory.bind(c.status), { name: host.options.name }, 'get node history')).updates;
    }
    const last = updates.at(-1);
    if (last) {
      const phases = last.phases.map((p) => `${p.name} ${p.endedUnixMs ? `${p.endedUnixMs - p.startedUnixMs}ms` : '-'}`).join(', ');
      say(`     history     ${updates.length} update${updates.length === 1 ? '' : 's'}; the last ${last.result} in ${last.endedUnixMs - last.startedUnixMs}ms: ${phases}`);
    }
  }
  say(dim('\n   `mcctl describe node NAME` ends with a node\'s update timeline; `mcctl get events` lists what'));
  say(dim('   happened (config rendered, node assigned, each phase, done, degraded), like kubectl get events.'));
  say(dim(`\n   Each host's files are under its temporary root; the demo removes them now. To explore a`));
  say(dim(`   running control plane instead, follow docs/operate/day-to-day.md.`));
}

/** Prints node progress and pool lines from StatusService.Watch as they happen. */
function watch(c: Clients): () => void {
  const seen = new Map<string, string>();
  const stream = c.status.watch({ pools: false, nodes: false });
  stream.on('data', (e: WatchEvent__Output) => {
    if (e.node?.status) {
      const n = e.node;
      const s = n.status!;
      const key = `${s.state}|${s.phase}|${s.currentConfig}|${s.desiredConfig}|${s.connected}`;
      if (seen.get(n.name) === key) return;
      seen.set(n.name, key);
      const target = s.desiredConfig && s.desiredConfig !== s.currentConfig ? ` -> ${short(s.desiredConfig)}` : '';
      const flag = !s.connected ? ' (disconnected: rebooting or starting)' : '';
      say(row(time(), n.name, s.state, s.phase || '-', `${short(s.currentConfig)}${target}${flag}${s.reason ? `  ${s.reason}` : ''}`));
    } else if (e.pool?.status && e.type !== 'ADDED') {
      const p = e.pool;
      const s = p.status!;
      const updating = s.conditions.find((x) => x.type === 'Updating');
      const key = `${s.configuration}|${s.updatedMachineCount}|${s.machineCount}|${updating?.status}`;
      if (seen.get(`pool/${p.name}`) === key || s.machineCount === 0) return;
      seen.set(`pool/${p.name}`, key);
      say(dim(`   ${time()}  pool ${p.name}: ${s.updatedMachineCount}/${s.machineCount} updated to ${short(s.configuration)}${updating?.status === 'True' ? `; ${updating.message.replace(/^.*?; /, '')}` : ''}`));
    }
  });
  stream.on('error', () => undefined);
  return () => stream.cancel();
}

async function untilUpdated(c: Clients, pools: string[]): Promise<void> {
  const deadline = Date.now() + 180_000;
  for (;;) {
    for (const h of hosts) {
      if (interrupted) return;
      const reboot = h.rebootIfRequested();
      inFlight.push(reboot);
      await reboot;
    }
    if (interrupted) return;
    const states = await Promise.all(pools.map((name) => call(c, c.status.getPool.bind(c.status), { name }, 'get pool')));
    const done = states.every((p) => p.status!.machineCount > 0 && p.status!.conditions.find((x) => x.type === 'Updated')?.status === 'True');
    if (done) return;
    const degraded = states.find((p) => p.status!.degradedMachineCount > 0);
    if (degraded) throw new Error(`pool ${degraded.name} is degraded: ${degraded.status!.conditions.find((x) => x.type === 'NodeDegraded')?.message}`);
    if (Date.now() > deadline) throw new Error(`pools ${pools.join(', ')} did not reach Updated within 3 minutes`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

main()
  .catch((err: unknown) => {
    // After Ctrl-C, calls cut off by the shutdown fail; that is the interruption, not a failure.
    if (interrupted) return;
    process.stderr.write(`demo failed: ${(err as Error).message}\n`);
    process.exitCode = 1;
  })
  .finally(() => cleanup());
