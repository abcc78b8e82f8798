// mcctl: the command line for mcplane. Reads feel like `oc get mcp`; every failure ends with a
// message on stderr and a non-zero exit, never a stack trace.

import { Command, Option } from 'commander';
import { ConfigurationError, escapeControlCharacters, McplaneError } from '../machineconfig/index.ts';
import { silenceIpServernameWarning } from '../runtime/process-warnings.ts';
import { isEntryPoint } from '../runtime/entry-point.ts';
import { VERSION } from '../runtime/version.ts';
import { connect, type Clients, type ConnectionFlags } from './client/connection.ts';
import { renderCommand, validateCommand } from './commands/offline.ts';
import { pkiCaPromoteCommand, pkiCaRetireCommand, pkiCaRotateCommand, pkiInitCommand, pkiNodeCommand, pkiReplicaCommand } from './commands/pki.ts';
import { approveEnrollmentCommand, denyEnrollmentCommand, revokeCommand, tokenCreateCommand } from './commands/identity.ts';
import { describeCommand, getCommand, type Io } from './commands/read.ts';
import { completionScript } from './commands/completion.ts';
import { checkDashboardAddress, dashboardCommand, parseDashboardPort } from './commands/dashboard.ts';
import { versionCommand } from './commands/version.ts';
import { parseDuration, waitCommand } from './commands/wait.ts';
import { watchCommand } from './commands/watch.ts';
import { importCommand } from './commands/import.ts';
import { applyCommand, deleteCommand, labelCommand, pauseCommand, reapplyCommand } from './commands/write.ts';
import { parseGetFormat, type OutputFormat } from './output.ts';

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** How to reach the server; on the program (before the verb) and on each remote verb (after it). */
function connectionOptions(cmd: Command, timeoutFlag = '--timeout <seconds>'): Command {
  return cmd
    .option('-s, --server <host:port>', 'mcplane-server gRPC address (or MCPLANE_SERVER)')
    .option('--pki-dir <dir>', 'use ca.crt, admin.crt and admin.key from this directory (mcctl pki init)')
    .option('--ca <file>', 'CA certificate the server\'s certificate must chain to')
    .option('--cert <file>', 'client certificate (O=mcplane:admins)')
    .option('--key <file>', 'client private key')
    .option('--insecure', 'plaintext, for a server started with --insecure on loopback')
    .option(timeoutFlag, 'deadline for each call (default 10)')
    .option('--config <file>', 'client config file (default ~/.config/mcplane/mcctl.yaml)');
}

export function buildProgram(io: Io): Command {
  const write = io.out;
  const program = connectionOptions(new Command('mcctl'))
    .description('Configure fleets of image-based Linux hosts with MachineConfigs')
    .version(VERSION, '--version')
    // Options after the verb belong to the verb: `wait --timeout 10m` is the wait's own limit.
    .enablePositionalOptions()
    .showHelpAfterError()
    .exitOverride();

  /** Connection flags given before the verb, overridden by those given after it. */
  const flagsOf = (cmd: Command): ConnectionFlags => {
    const own = Object.fromEntries(Object.entries(cmd.opts()).filter(([, v]) => v !== undefined));
    // A verb with --request-timeout uses --timeout for itself (wait, rollout status).
    if (cmd.options.some((o) => o.long === '--request-timeout')) delete own.timeout;
    const merged = { ...program.opts<ConnectionFlags>(), ...own } as ConnectionFlags & { requestTimeout?: string };
    if (own.requestTimeout !== undefined) merged.timeout = own.requestTimeout as string;
    return merged;
  };
  let current: Command = program;
  program.hook('preAction', (_root, action) => { current = action; });
  const withClients = async (fn: (c: Clients) => Promise<string | void>): Promise<void> => {
    const c = connect(flagsOf(current));
    try {
      const out = await fn(c);
      if (out) write(out);
    } finally {
      c.close();
    }
  };
  const output = (): Option => new Option('-o, --output <format>', 'output format').choices(['yaml', 'json']).default('yaml');
  const files = (cmd: Command): Command => cmd.requiredOption('-f, --filename <path>', 'file or directory of manifests; repeatable; - for stdin', collect);

  files(program.command('render').description('print the rendered config of a pool from local files (no server)'))
    .requiredOption('--pool <name>', 'pool to render (master, worker, or a pool defined in the files)')
    .addOption(output())
    .action((opts: { filename: string[]; pool: string; output: OutputFormat }) => write(renderCommand(opts.filename, opts.pool, opts.output)));

  files(program.command('validate').description('check MachineConfig and MachineConfigPool files (no server)'))
    .action((opts: { filename: string[] }) => write(validateCommand(opts.filename)));

  connectionOptions(program.command('get'))
    .description('list pools (mcp), nodes, mc, rendered configs, replicas, events, tokens or enrollments, or get them by name')
    .argument('<resource...>', 'TYPE [NAME...] | TYPE/NAME... (types: pools, nodes, mc, rendered, replicas, events, tokens, enrollments)')
    .option('-l, --selector <selector>', 'label selector, e.g. node-role.kubernetes.io/worker,topology.kubernetes.io/zone in (a,b)')
    .option('-o, --output <format>', 'wide | name | yaml | json | jsonpath=TEMPLATE (kubectl\'s {.items[*].metadata.name} syntax)')
    .option('-w, --watch', 'after the list, print a row for every change (pools, nodes and events)')
    .option('--no-headers', 'no header row in tables')
    .option('--pool <name>', 'only nodes, rendered configs or events of this pool')
    .option('--node <name>', 'only events about this node (get events)')
    .action((args: string[], opts: { selector?: string; output?: string; watch?: boolean; headers: boolean; pool?: string; node?: string }) => {
      const format = parseGetFormat(opts.output);
      return withClients((c) => getCommand(c, io, args, { format, selector: opts.selector, watch: opts.watch ?? false, headers: opts.headers, pool: opts.pool, node: opts.node }));
    });

  connectionOptions(program.command('describe')).description('show a pool or a node in detail (conditions, reasons, drift), or machineconfiguration cluster: the node disruption policy in force')
    .argument('<resource>', 'pool | node | machineconfiguration')
    .argument('<name>')
    .action((resource: string, name: string) => withClients((c) => describeCommand(c, resource, name)));

  files(connectionOptions(program.command('apply')).description('create or update MachineConfigs and pools (all or nothing)'))
    .option('--dry-run', 'validate and report what would change, store nothing; previews every node\'s update (action, why, batch, window)')
    .addOption(new Option('-o, --output <format>', 'print the result (and the dry-run preview) for machines').choices(['yaml', 'json']))
    .action((opts: { filename: string[]; dryRun?: boolean; output?: OutputFormat }) => withClients((c) => applyCommand(c, opts.filename, opts.dryRun ?? false, io.err, opts.output)));

  connectionOptions(program.command('import')).description('import an existing cluster\'s MachineConfigs and MachineConfigPools through Apply (the path off MCO); MCO\'s rendered-* configs are skipped')
    .requiredOption('--kubeconfig <file>', 'kubeconfig of the cluster to import from (needs list on machineconfigs and machineconfigpools)')
    .option('--dry-run', 'validate and report what would change, store nothing')
    .action((opts: { kubeconfig: string; dryRun?: boolean }) => withClients((c) => importCommand(c, opts.kubeconfig, opts.dryRun ?? false, io.err)));

  connectionOptions(program.command('delete')).description('delete a MachineConfig, a custom pool, or a retired node')
    .argument('<resource>', 'mc | pool | node')
    .argument('<name>')
    .action((resource: string, name: string) => withClients((c) => deleteCommand(c, resource, name)));

  for (const [verb, paused] of [['pause', true], ['resume', false]] as const) {
    connectionOptions(program.command(verb)).description(paused ? 'stop handing out new configs in a pool (it keeps rendering)' : 'let a paused pool roll out again')
      .argument('<resource>', 'pool')
      .argument('<name>')
      .action((resource: string, name: string) => withClients((c) => pauseCommand(c, resource, name, paused)));
  }

  connectionOptions(program.command('watch')).description('print pool and node changes as they happen, reconnecting after a server restart (Ctrl-C to stop)')
    .option('--pools', 'pools only')
    .option('--nodes', 'nodes only')
    .option('--events', 'also events (with --pools or --nodes: those and events; alone: events only)')
    .option('--give-up-after <duration>', 'exit non-zero after this long without a connection (e.g. 5m, 1h)', '5m')
    .action((opts: { pools?: boolean; nodes?: boolean; events?: boolean; giveUpAfter: string }) => {
      const giveUpAfterMs = parseDuration(opts.giveUpAfter, '--give-up-after');
      return withClients((c) => watchCommand(c, io, { pools: opts.pools ?? false, nodes: opts.nodes ?? false, events: opts.events ?? false, giveUpAfterMs }));
    });

  connectionOptions(program.command('wait'), '--request-timeout <seconds>')
    .description('wait until a pool has a condition (like kubectl wait), showing the rollout meanwhile')
    .argument('<pool/NAME>')
    .requiredOption('--for <condition=NAME>', 'condition=Updated, condition=Degraded, or condition=NAME=False')
    .option('--timeout <duration>', 'give up after this long (e.g. 30s, 10m; 0: never)', '30s')
    .action((target: string, opts: { for: string; timeout: string }) => {
      const timeoutMs = parseDuration(opts.timeout);
      return withClients((c) => waitCommand(c, io, target, { for: opts.for, timeoutMs, tty: io.isTTY ?? false, rollout: false }));
    });

  const rollout = program.command('rollout').description('follow a pool\'s rollout');
  connectionOptions(rollout.command('status'), '--request-timeout <seconds>')
    .description('show the rollout of a pool until every node is on its config; fails when a node degrades')
    .argument('<pool/NAME>')
    .option('--timeout <duration>', 'give up after this long (e.g. 10m; 0: never)', '0')
    .action((target: string, opts: { timeout: string }) => {
      const timeoutMs = parseDuration(opts.timeout);
      return withClients((c) => waitCommand(c, io, target, { for: 'condition=Updated', timeoutMs, tty: io.isTTY ?? false, rollout: true }));
    });

  connectionOptions(program.command('version'))
    .description('print the client and server versions')
    .addOption(new Option('-o, --output <format>', 'yaml or json').choices(['yaml', 'json']))
    .action((opts: { output?: string }) => versionCommand(() => connect(flagsOf(current)), io, opts.output));

  program.command('completion').description('print a shell completion script: source <(mcctl completion bash)')
    .argument('<shell>', 'bash | zsh')
    .action((shell: string) => write(completionScript(program, shell)));

  connectionOptions(program.command('label')).description('set (KEY=VALUE) or remove (KEY-) a node\'s labels, like kubectl label: the one way a registered node changes role or zone')
    .argument('<resource>', 'node')
    .argument('<name>')
    .argument('<changes...>', 'KEY=VALUE to set, KEY- to remove')
    .action((resource: string, name: string, changes: string[]) => {
      if (!['node', 'nodes', 'no'].includes(resource)) throw new ConfigurationError(`mcctl label works on nodes (mcctl label node NAME KEY=VALUE), not "${resource}"`);
      return withClients((c) => labelCommand(c, name, changes));
    });

  connectionOptions(program.command('dashboard'))
    .description('serve a live view of every pool and node on 127.0.0.1 (like kubectl proxy: your credentials, a URL with a token; Ctrl-C to stop)')
    .option('--port <port>', 'local port (0: any free one)', '0')
    .option('--address <ip>', 'local address to listen on: 127.0.0.1 only', '127.0.0.1')
    .action((opts: { port: string; address: string }) => {
      // Refused before anything connects: a wrong address is never half-served.
      checkDashboardAddress(opts.address);
      parseDashboardPort(opts.port);
      return withClients((c) => dashboardCommand(c, io, opts));
    });

  const node = program.command('node').description('node operations');
  connectionOptions(node.command('reapply')).description('force a full re-apply of the node\'s desired config (MCO\'s forcefile)')
    .argument('<name>')
    .action((name: string) => withClients((c) => reapplyCommand(c, name)));
  connectionOptions(node.command('revoke')).description('revoke the node\'s certificate: every replica refuses it from now on and ends its open stream')
    .argument('<name>')
    .action((name: string) => withClients((c) => revokeCommand(c, name)));

  connectionOptions(program.command('approve')).description('approve a host\'s enrollment request (mcctl get enrollments): it gets a certificate for its pool and joins')
    .argument('<resource>', 'enrollment')
    .argument('<name>', 'the node name of one pending request, or the request\'s ID (or 8+ characters of it)')
    .action((resource: string, name: string) => withClients((c) => approveEnrollmentCommand(c, resource, name)));
  connectionOptions(program.command('deny')).description('deny a host\'s enrollment request: it gets no certificate, and is told why')
    .argument('<resource>', 'enrollment')
    .argument('<name>', 'the node name of one pending request, or the request\'s ID (or 8+ characters of it)')
    .option('--reason <text>', 'what the host is told')
    .action((resource: string, name: string, opts: { reason?: string }) => withClients((c) => denyEnrollmentCommand(c, resource, name, opts.reason)));

  const pki = program.command('pki').description('certificates for a first install');
  pki.command('init').description('create a CA, server, admin and optional node certificates, and a bootstrap token')
    .argument('<dir>')
    .option('--host <name>', 'extra DNS name or IP for the server certificate; repeatable', collect, [])
    .option('--node <name>', 'also issue a node certificate; repeatable', collect, [])
    .action(async (dir: string, opts: { host: string[]; node: string[] }) => write(await pkiInitCommand(dir, opts.host, opts.node)));
  pki.command('node').description('issue a node certificate from an existing CA (give --pki-dir), bound to one pool')
    .argument('<name>')
    .option('--pki-dir <dir>', 'the directory mcctl pki init wrote')
    .option('--pool <pool>', 'the pool the node is bound to: it joins that role and cannot claim another (like Kubernetes\' NodeRestriction)', 'worker')
    .action(async (name: string, opts: { pkiDir?: string; pool: string }) => {
      const dir = opts.pkiDir ?? program.opts<ConnectionFlags>().pkiDir;
      if (!dir) throw new ConfigurationError('mcctl pki node needs --pki-dir DIR, the directory mcctl pki init wrote');
      write(await pkiNodeCommand(dir, name, opts.pool));
    });
  pki.command('replica').description('issue an mcplane-server replica\'s etcd client certificate (O=mcplane:replicas, CN=mcplane-replica@NAME) from an existing CA')
    .argument('<name>')
    .option('--pki-dir <dir>', 'the directory mcctl pki init wrote')
    .action(async (name: string, opts: { pkiDir?: string }) => {
      const dir = opts.pkiDir ?? program.opts<ConnectionFlags>().pkiDir;
      if (!dir) throw new ConfigurationError('mcctl pki replica needs --pki-dir DIR, the directory mcctl pki init wrote');
      write(await pkiReplicaCommand(dir, name));
    });
  const caCmd = pki.command('ca').description('CA rollover with overlap: rotate (add a next CA to the bundle), promote (it signs), retire (the old leaves the bundle)');
  caCmd.command('rotate').argument('<dir>', 'the directory mcctl pki init wrote').description('make a next CA and add it to ca.crt; the current CA still signs')
    .action(async (dir: string) => write(await pkiCaRotateCommand(dir)));
  caCmd.command('promote').argument('<dir>', 'the directory mcctl pki init wrote').description('make the next CA the one that signs (ca.key); the old stays trusted')
    .action(async (dir: string) => write(await pkiCaPromoteCommand(dir)));
  caCmd.command('retire').argument('<dir>', 'the directory mcctl pki init wrote').description('drop every CA but the signing one from ca.crt, and issue server.crt and admin.crt again with it')
    .action(async (dir: string) => write(await pkiCaRetireCommand(dir)));
  const token = pki.command('token').description('bootstrap tokens: each serves one pool\'s config on the bootstrap endpoint');
  connectionOptions(token.command('create')).description('make a bootstrap token for one pool (printed once; list them with mcctl get tokens, remove with mcctl delete token ID)')
    .requiredOption('--pool <pool>', 'the one pool the token serves: a worker\'s token cannot fetch master\'s config')
    .option('--ttl <duration>', 'how long it is valid, e.g. 24h or 7d (default: until deleted)')
    .option('--description <text>', 'what the token is for, shown by mcctl get tokens')
    .action((opts: { pool: string; ttl?: string; description?: string }) => withClients((c) => tokenCreateCommand(c, opts, io.err)));

  return program;
}

export async function main(argv: string[]): Promise<number> {
  silenceIpServernameWarning();
  // stderr carries only messages (notices, warnings, errors), many quoting what a server or a
  // node said: every control there but line feeds and tabs is shown escaped (format.ts says why).
  const toStderr = (text: string): boolean => process.stderr.write(escapeControlCharacters(text, { multiline: true }));
  const program = buildProgram({ out: (text) => process.stdout.write(text), err: toStderr, isTTY: process.stdout.isTTY === true });
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    const e = err as { code?: string; exitCode?: number; message?: string };
    if (typeof e.code === 'string' && e.code.startsWith('commander.')) return e.exitCode ?? 2;
    if (err instanceof McplaneError) {
      toStderr(`error: ${err.message}\n`);
      return 1;
    }
    toStderr(`error: ${e.message ?? String(err)}\n`);
    return 1;
  }
}

if (isEntryPoint(import.meta.url)) {
  void main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
}
