// mcctl: the command line for mcplane. Reads feel like `oc get mcp`; every failure ends with a
// message on stderr and a non-zero exit, never a stack trace.

import { Command, Option } from 'commander';
import { ConfigurationError, McplaneError } from '../machineconfig/errors.ts';
import { escapeControlCharacters } from '../machineconfig/control-characters.ts';
import { silenceIpServernameWarning } from '../runtime/process-warnings.ts';
import { isEntryPoint } from '../runtime/entry-point.ts';
import { VERSION } from '../runtime/version.ts';
import type { Clients, ConnectionFlags } from './client/connection.ts';

// Each command's module is imported when that command runs, so that a bundle runs only what the
// command needs: `mcctl get pools` does not start the PKI and Kubernetes clients (with them it
// took three times as long to start). esbuild keeps these in the one bundle, evaluated on first use.
const commands = {
  offline: () => import('./commands/offline.ts'),
  pki: () => import('./commands/pki.ts'),
  identity: () => import('./commands/identity.ts'),
  read: () => import('./commands/read.ts'),
  completion: () => import('./commands/completion.ts'),
  dashboard: () => import('./commands/dashboard.ts'),
  version: () => import('./commands/version.ts'),
  wait: () => import('./commands/wait.ts'),
  watch: () => import('./commands/watch.ts'),
  import: () => import('./commands/import.ts'),
  write: () => import('./commands/write.ts'),
  drift: () => import('./commands/drift.ts'),
  config: () => import('./commands/config.ts'),
  completeNames: () => import('./commands/complete-names.ts'),
  output: () => import('./output.ts'),
  connection: () => import('./client/connection.ts'),
};

import type { Io } from './commands/read.ts';
import type { OutputFormat } from './output.ts';
import { COMMAND_EXAMPLES } from './examples.ts';

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/**
 * How to reach the server: the connection flags. As kubectl's global flags they are listed once,
 * by `mcctl options`, and hidden from each command's help; they are accepted before the verb
 * (the program's) and after it (the verb's, which win).
 */
export function connectionFlagOptions(): Option[] {
  return [
    new Option('-s, --server <host:port>', 'mcplane-server gRPC address (or MCPLANE_SERVER)'),
    new Option('--status-server <host:port>', 'send reads (get, describe, -w, the dashboard) here: a server\'s --status-listen, which answers them apart from its agents (or MCPLANE_STATUS_SERVER)'),
    new Option('--pki-dir <dir>', 'use ca.crt, admin.crt and admin.key from this directory (mcctl pki init)'),
    new Option('--ca <file>', 'CA certificate the server\'s certificate must chain to'),
    new Option('--cert <file>', 'client certificate (O=mcplane:admins, mcplane:operators or mcplane:viewers: mcctl pki operator)'),
    new Option('--key <file>', 'client private key'),
    new Option('--insecure', 'plaintext, for a server started with --insecure on loopback'),
    new Option('--request-timeout <duration>', 'limit on each call to the server: seconds or a duration such as 30s (default 10)'),
    new Option('--config <file>', 'client config file (default ~/.config/mcplane/mcctl.yaml, or MCCTL_CONFIG)'),
    new Option('--context <name>', 'the context of the config file to use (mcctl config get-contexts; or MCPLANE_CONTEXT)'),
  ];
}

/** --timeout as the limit on each call: its old meaning, kept working (with a warning) where it is not a wait's own limit. */
const legacyTimeout = (): Option => new Option('--timeout <seconds>', 'old name of --request-timeout').hideHelp();

function connectionOptions(cmd: Command, options: { legacyTimeout?: boolean } = {}): Command {
  for (const o of connectionFlagOptions()) cmd.addOption(o.hideHelp());
  if (options.legacyTimeout !== false) cmd.addOption(legacyTimeout());
  CONNECTED.add(cmd);
  return cmd;
}

/** Commands that talk to a server: their help points at `mcctl options`. */
const CONNECTED = new WeakSet<Command>();

/** Each command's examples, shown in its help and in its man page. */
export const EXAMPLES = new WeakMap<Command, string[]>();

function examples(cmd: Command, lines: string[]): Command {
  EXAMPLES.set(cmd, lines);
  return cmd;
}

/** The command's words from the program down: "mcctl rollout status". */
export function commandPath(cmd: Command): string {
  const words: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) words.unshift(c.name());
  return words.join(' ');
}

/** What `mcctl options` prints: the connection flags, once for every command. */
export function optionsText(): string {
  const flags = connectionFlagOptions();
  const width = Math.max(...flags.map((o) => o.flags.length));
  return 'The following options can be passed to any command that talks to a server, before or after the verb:\n\n' +
    flags.map((o) => `  ${o.flags.padEnd(width)}  ${o.description}\n`).join('') +
    '\nThey can also come from the environment (MCPLANE_SERVER, MCPLANE_STATUS_SERVER, MCPLANE_PKI_DIR, MCPLANE_INSECURE=1,\n' +
    'MCPLANE_CONTEXT)\n' +
    'or from the config file, whose contexts name several servers (mcctl config get-contexts).\n';
}

export function buildProgram(io: Io): Command {
  const write = io.out;
  const program = connectionOptions(new Command('mcctl'))
    .description('Configure fleets of image-based Linux hosts with MachineConfigs')
    .version(VERSION, '--version')
    // Options after the verb belong to the verb: `wait --timeout 10m` is the wait's own limit.
    .enablePositionalOptions()
    .exitOverride();

  /** Connection flags given before the verb, overridden by those given after it. */
  // The option keys (camelCase) of the connection flags.
  const CONNECTION_KEYS = new Set(connectionFlagOptions().map((o) => o.attributeName()));
  const flagsOf = (cmd: Command): ConnectionFlags => {
    const connectionOf = (c: Command): ConnectionFlags => Object.fromEntries(Object.entries(c.opts())
      .filter(([k, v]) => v !== undefined && CONNECTION_KEYS.has(k))) as ConnectionFlags;
    const legacyOf = (c: Command): string | undefined => (c.options.some((o) => o.long === '--timeout' && o.hidden) ? c.opts<{ timeout?: string }>().timeout : undefined);
    const legacy = (cmd === program ? undefined : legacyOf(cmd)) ?? legacyOf(program);
    if (legacy !== undefined) {
      io.err('warning: --timeout is --request-timeout now (the limit on each call); wait and rollout status take --timeout for the whole wait\n');
    }
    return { ...(legacy !== undefined ? { requestTimeout: legacy } : {}), ...connectionOf(program), ...(cmd === program ? {} : connectionOf(cmd)) };
  };
  let current: Command = program;
  program.hook('preAction', (_root, action) => { current = action; });
  /**
   * readsFromServer: StatusService on --server even when --status-server is given. `wait` and
   * `rollout status` run right after a write, and --server's cache has every write it
   * acknowledged; the status thread's catches up a moment later and could still say Updated.
   */
  const withClients = async (fn: (c: Clients) => Promise<string | void>, options: { readsFromServer?: boolean } = {}): Promise<void> => {
    const c = (await commands.connection()).connect({ ...flagsOf(current), ...(options.readsFromServer ? { readsFromServer: true } : {}) });
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
    .action(async (opts: { filename: string[]; pool: string; output: OutputFormat }) => write((await commands.offline()).renderCommand(opts.filename, opts.pool, opts.output)));

  files(program.command('validate').description('check MachineConfig and MachineConfigPool files (no server)'))
    .action(async (opts: { filename: string[] }) => write((await commands.offline()).validateCommand(opts.filename)));

  connectionOptions(program.command('get'))
    .description('list pools (mcp), nodes, mc, rendered configs, machineconfignodes (mcn), replicas, events, tokens, enrollments, the audit trail or drifted nodes, or get them by name')
    .argument('<resource...>', 'TYPE [NAME...] | TYPE/NAME... (types: pools, nodes, mc, rendered, mcn, replicas, events, tokens, enrollments, audit, drift)')
    .option('-l, --selector <selector>', 'label selector, e.g. node-role.kubernetes.io/worker,topology.kubernetes.io/zone in (a,b)')
    .option('-o, --output <format>', 'wide | name | yaml | json | jsonpath=TEMPLATE (kubectl\'s {.items[*].metadata.name} syntax) | custom-columns=HEADER:EXPR,...')
    .option('--sort-by <jsonpath>', 'sort by a field of the objects, e.g. .metadata.name or .status.machineCount')
    .option('--show-labels', 'add a LABELS column')
    .option('-w, --watch', 'after the list, print a row for every change (pools, nodes and events)')
    .option('--no-headers', 'no header row in tables')
    .option('--pool <name>', 'only nodes, rendered configs, machineconfignodes, events or drift of this pool')
    .option('--node <name>', 'only events about this node (get events)')
    .option('--since <duration>', 'only audit records of the last DURATION, e.g. 1h, 7d (get audit)')
    .action(async (args: string[], opts: { selector?: string; output?: string; watch?: boolean; headers: boolean; pool?: string; node?: string; since?: string; sortBy?: string; showLabels?: boolean }) => {
      const format = (await commands.output()).parseGetFormat(opts.output);
      if (opts.sortBy !== undefined) (await commands.output()).checkSortBy(opts.sortBy);
      return withClients(async (c) => (await commands.read()).getCommand(c, io, args, { format, selector: opts.selector, watch: opts.watch ?? false, headers: opts.headers, pool: opts.pool, node: opts.node, since: opts.since, sortBy: opts.sortBy, showLabels: opts.showLabels }));
    });

  connectionOptions(program.command('describe')).description('show a pool or a node in detail (conditions, reasons, drift), or machineconfiguration cluster: the node disruption policy in force')
    .argument('<resource>', 'pool | node | machineconfiguration')
    .argument('<name>')
    .action(async (resource: string, name: string) => withClients(async (c) => (await commands.read()).describeCommand(c, resource, name)));

  files(connectionOptions(program.command('apply')).description('create or update MachineConfigs and pools (all or nothing)'))
    .option('--dry-run', 'validate and report what would change, store nothing; previews every node\'s update (action, why, batch, window)')
    .option('--try <timeout>', 'try mode for this change: each node that gets the config it renders keeps it only if its checks pass (the pool\'s spec.rollout.confirm checks, else its health gate\'s and the control plane over the agent\'s stream) or it is confirmed (mcctl confirm) within the timeout (1s to 24h, e.g. 5m); otherwise it reverts by itself')
    .addOption(new Option('-o, --output <format>', 'print the result (and the dry-run preview) for machines').choices(['yaml', 'json']))
    .action(async (opts: { filename: string[]; dryRun?: boolean; try?: string; output?: OutputFormat }) => withClients(async (c) => (await commands.write()).applyCommand(c, opts.filename, opts.dryRun ?? false, io.err, opts.output, opts.try)));

  connectionOptions(program.command('import')).description('import an existing cluster\'s MachineConfigs and MachineConfigPools through Apply (the path off MCO); MCO\'s rendered-* configs are skipped; its MachineConfigNodes are compared with mcplane\'s nodes, not stored')
    .requiredOption('--kubeconfig <file>', 'kubeconfig of the cluster to import from (needs list on machineconfigs and machineconfigpools)')
    .option('--dry-run', 'validate and report what would change, store nothing')
    .action(async (opts: { kubeconfig: string; dryRun?: boolean }) => withClients(async (c) => (await commands.import()).importCommand(c, opts.kubeconfig, opts.dryRun ?? false, io.err)));

  connectionOptions(program.command('delete')).description('delete a MachineConfig, a custom pool, or a retired node')
    .argument('<resource>', 'mc | pool | node')
    .argument('<name>')
    .action(async (resource: string, name: string) => withClients(async (c) => (await commands.write()).deleteCommand(c, resource, name)));

  for (const [verb, paused] of [['pause', true], ['resume', false]] as const) {
    connectionOptions(program.command(verb)).description(paused ? 'stop handing out new configs in a pool (it keeps rendering)' : 'let a paused pool roll out again')
      .argument('<resource>', 'pool')
      .argument('<name>')
      .action(async (resource: string, name: string) => withClients(async (c) => (await commands.write()).pauseCommand(c, resource, name, paused)));
  }

  connectionOptions(program.command('confirm')).description('confirm by hand the tries in progress (spec.rollout.confirm) on a pool\'s nodes or one node: they keep the config instead of reverting at the timeout')
    .argument('<resource>', 'pool | node')
    .argument('<name>')
    .action(async (resource: string, name: string) => withClients(async (c) => (await commands.write()).confirmCommand(c, resource, name)));

  connectionOptions(program.command('watch')).description('print pool and node changes as they happen, reconnecting after a server restart (Ctrl-C to stop)')
    .option('--pools', 'pools only')
    .option('--nodes', 'nodes only')
    .option('--events', 'also events (with --pools or --nodes: those and events; alone: events only)')
    .option('--give-up-after <duration>', 'exit non-zero after this long without a connection (e.g. 5m, 1h)', '5m')
    .action(async (opts: { pools?: boolean; nodes?: boolean; events?: boolean; giveUpAfter: string }) => {
      const giveUpAfterMs = (await commands.wait()).parseDuration(opts.giveUpAfter, '--give-up-after');
      return withClients(async (c) => (await commands.watch()).watchCommand(c, io, { pools: opts.pools ?? false, nodes: opts.nodes ?? false, events: opts.events ?? false, giveUpAfterMs }));
    });

  connectionOptions(program.command('wait'), { legacyTimeout: false })
    .description('wait until a pool has a condition (like kubectl wait), showing the rollout meanwhile')
    .argument('<pool/NAME>')
    .requiredOption('--for <condition=NAME>', 'condition=Updated, condition=Degraded, or condition=NAME=False')
    .option('--timeout <duration>', 'give up the whole wait after this long (e.g. 30s, 10m; 0: never); each call\'s limit is --request-timeout', '30s')
    .action(async (target: string, opts: { for: string; timeout: string }) => {
      const timeoutMs = (await commands.wait()).parseDuration(opts.timeout);
      return withClients(async (c) => (await commands.wait()).waitCommand(c, io, target, { for: opts.for, timeoutMs, tty: io.isTTY ?? false, rollout: false }), { readsFromServer: true });
    });

  const rollout = program.command('rollout').description('follow a pool\'s rollout');
  connectionOptions(rollout.command('status'), { legacyTimeout: false })
    .description('show the rollout of a pool until every node is on its config; fails when a node degrades')
    .argument('<pool/NAME>')
    .option('--timeout <duration>', 'give up the whole wait after this long (e.g. 10m; 0: never); each call\'s limit is --request-timeout', '0')
    .action(async (target: string, opts: { timeout: string }) => {
      const timeoutMs = (await commands.wait()).parseDuration(opts.timeout);
      return withClients(async (c) => (await commands.wait()).waitCommand(c, io, target, { for: 'condition=Updated', timeoutMs, tty: io.isTTY ?? false, rollout: true }), { readsFromServer: true });
    });

  connectionOptions(program.command('version'))
    .description('print the client and server versions')
    .addOption(new Option('-o, --output <format>', 'yaml or json').choices(['yaml', 'json']))
    .action(async (opts: { output?: string }) => {
      const { connect } = await commands.connection();
      return (await commands.version()).versionCommand(() => connect(flagsOf(current)), io, opts.output);
    });

  program.command('completion').description('print a shell completion script: source <(mcctl completion bash)')
    .argument('<shell>', 'bash | zsh | fish')
    .action(async (shell: string) => write((await commands.completion()).completionScript(program, shell)));

  program.command('options').description('list the connection flags every command that talks to a server takes')
    .action(async () => write(optionsText()));

  const config = program.command('config').description('the client config file: its contexts (several servers), as kubectl config');
  // kubectl config takes --kubeconfig after the verb: these take --config (and --context) there too.
  const fileOptions = (cmd: Command, context = true): Command => {
    cmd.addOption(new Option('--config <file>', 'the config file (default ~/.config/mcplane/mcctl.yaml, or MCCTL_CONFIG)'));
    if (context) cmd.addOption(new Option('--context <name>', 'the context to mark as current in the listing').hideHelp());
    return cmd;
  };
  fileOptions(config.command('get-contexts')).description('list the contexts of the config file; * marks the one in use')
    .argument('[name...]')
    .option('--no-headers', 'no header row')
    .action(async (names: string[], opts: { headers: boolean }) => write((await commands.config()).getContextsCommand(flagsOf(current), opts.headers, names)));
  fileOptions(config.command('current-context')).description('print the name of the context in use')
    .action(async () => write((await commands.config()).currentContextCommand(flagsOf(current))));
  fileOptions(config.command('use-context'), false).description('make a context the one in use (currentContext in the config file)')
    .argument('<name>')
    .action(async (name: string) => write((await commands.config()).useContextCommand(flagsOf(current), name)));
  const setContext = fileOptions(config.command('set-context'), false).description('add a context, or change the keys given of an existing one')
    .argument('<name>')
    .option('--current', 'also make it the context in use');
  for (const o of connectionFlagOptions()) if (!['--config', '--context'].includes(o.long!)) setContext.addOption(o);
  setContext.action(async (name: string, opts: ConnectionFlags & { current?: boolean }) => {
    const { current: use, config: _file, ...keys } = opts;
    if (keys.requestTimeout !== undefined) (await commands.connection()).parseRequestTimeout(keys.requestTimeout);
    return write((await commands.config()).setContextCommand(flagsOf(setContext), name, keys, use ?? false));
  });

  // The man pages, generated from these definitions, into a directory (the client RPM's build runs it).
  program.command('__man', { hidden: true }).argument('<dir>')
    .action(async (dir: string) => {
      const [{ manPages }, { mkdirSync, writeFileSync }, { join }] = await Promise.all([import('./man-pages.ts'), import('node:fs'), import('node:path')]);
      mkdirSync(dir, { recursive: true });
      const pages = manPages(program, EXAMPLES, connectionFlagOptions());
      for (const [file, text] of pages) writeFileSync(join(dir, file), text);
      write(`${pages.size} man pages in ${dir}\n`);
    });

  // What shells call to complete object names from the server (completion.ts); not for people.
  program.command('__complete', { hidden: true }).argument('[words...]')
    .allowUnknownOption()
    .helpOption(false)
    .action(async (words: string[]) => {
      // A shell waits for this with the user's line frozen: whatever the server does, it ends
      // soon after the call's own limit, rather than when a half-open connection lets go.
      setTimeout(() => process.exit(0), 5_000).unref();
      const { connect } = await commands.connection();
      write(await (await commands.completeNames()).completeNames(words, connect));
    });

  connectionOptions(program.command('label')).description('set (KEY=VALUE) or remove (KEY-) a node\'s labels, like kubectl label: the one way a registered node changes role or zone')
    .argument('<resource>', 'node')
    .argument('<name>')
    .argument('<changes...>', 'KEY=VALUE to set, KEY- to remove')
    .action(async (resource: string, name: string, changes: string[]) => {
      if (!['node', 'nodes', 'no'].includes(resource)) throw new ConfigurationError(`mcctl label works on nodes (mcctl label node NAME KEY=VALUE), not "${resource}"`);
      return withClients(async (c) => (await commands.write()).labelCommand(c, name, changes));
    });

  connectionOptions(program.command('dashboard'))
    .description('serve a live view of every pool and node on 127.0.0.1 (like kubectl proxy: your credentials, a URL with a token; Ctrl-C to stop)')
    .option('--port <port>', 'local port (0: any free one)', '0')
    .option('--address <ip>', 'local address to listen on: 127.0.0.1 only', '127.0.0.1')
    .action(async (opts: { port: string; address: string }) => {
      // Refused before anything connects: a wrong address is never half-served.
      (await commands.dashboard()).checkDashboardAddress(opts.address);
      (await commands.dashboard()).parseDashboardPort(opts.port);
      return withClients(async (c) => (await commands.dashboard()).dashboardCommand(c, io, opts));
    });

  const drift = program.command('drift').description('what nodes changed behind their agent\'s back (mcctl get drift lists them)');
  connectionOptions(drift.command('adopt'))
    .description('print a drifted node\'s version of its files as a MachineConfig for its pool (driftPolicy Adopt), to review and mcctl apply -f')
    .argument('<node>')
    .addOption(output())
    .action(async (name: string, opts: { output: OutputFormat }) => withClients(async (c) => (await commands.drift()).driftAdoptCommand(c, name, opts.output, io.err)));

  const node = program.command('node').description('node operations');
  connectionOptions(node.command('reapply')).description('force a full re-apply of the node\'s desired config (MCO\'s forcefile)')
    .argument('<name>')
    .action(async (name: string) => withClients(async (c) => (await commands.write()).reapplyCommand(c, name)));
  connectionOptions(node.command('revoke')).description('revoke the node\'s certificate: every replica refuses it from now on and ends its open stream')
    .argument('<name>')
    .action(async (name: string) => withClients(async (c) => (await commands.identity()).revokeCommand(c, name)));

  connectionOptions(program.command('approve')).description('approve a host\'s enrollment request (mcctl get enrollments): it gets a certificate for its pool and joins')
    .argument('<resource>', 'enrollment')
    .argument('<name>', 'the node name of one pending request, or the request\'s ID (or 8+ characters of it)')
    .action(async (resource: string, name: string) => withClients(async (c) => (await commands.identity()).approveEnrollmentCommand(c, resource, name)));
  connectionOptions(program.command('deny')).description('deny a host\'s enrollment request, or every pending one: it gets no certificate, and is told why')
    .argument('<resource>', 'enrollment')
    .argument('[name]', 'the node name of one pending request, or the request\'s ID (or 8+ characters of it)')
    .option('--reason <text>', 'what the host is told')
    .option('--all-pending', 'deny every pending request (after a flood of requests to join)')
    .option('--from <cidr>', 'with --all-pending: only those from client addresses in this network, e.g. 192.0.2.0/24')
    .action(async (resource: string, name: string | undefined, opts: { reason?: string; allPending?: boolean; from?: string }) => withClients(async (c) => (await commands.identity()).denyEnrollmentCommand(c, resource, name, opts)));

  const pki = program.command('pki').description('certificates for a first install');
  pki.command('init').description('create a CA, server, admin and optional node certificates, and a bootstrap token')
    .argument('<dir>')
    .option('--host <name>', 'extra DNS name or IP for the server certificate; repeatable', collect, [])
    .option('--node <name>', 'also issue a node certificate; repeatable', collect, [])
    .action(async (dir: string, opts: { host: string[]; node: string[] }) => write(await (await commands.pki()).pkiInitCommand(dir, opts.host, opts.node)));
  pki.command('node').description('issue a node certificate from an existing CA (give --pki-dir), bound to one pool')
    .argument('<name>')
    .option('--pki-dir <dir>', 'the directory mcctl pki init wrote')
    .option('--pool <pool>', 'the pool the node is bound to: it joins that role and cannot claim another (like Kubernetes\' NodeRestriction)', 'worker')
    .option('--generation <n>', 'the node name\'s certificate generation (0 until the node is first revoked or deleted; the refusal of an older one names the current)', '0')
    .action(async (name: string, opts: { pkiDir?: string; pool: string; generation: string }) => {
      const dir = opts.pkiDir ?? program.opts<ConnectionFlags>().pkiDir;
      if (!dir) throw new ConfigurationError('mcctl pki node needs --pki-dir DIR, the directory mcctl pki init wrote');
      write(await (await commands.pki()).pkiNodeCommand(dir, name, opts.pool, opts.generation));
    });
  pki.command('operator').description('issue an API credential for a person or tool: viewer (reads and watches), operator (also pause, label, re-apply, enrollment decisions; --pool limits it) or admin (everything)')
    .argument('<name>')
    .option('--pki-dir <dir>', 'the directory mcctl pki init wrote')
    .addOption(new Option('--role <role>', 'what the credential may do').choices(['viewer', 'operator', 'admin']).makeOptionMandatory())
    .option('--pool <pool>', 'with --role operator: the pools it may act on; repeatable (default: every pool)', collect, [])
    .action(async (name: string, opts: { pkiDir?: string; role: string; pool: string[] }) => {
      const dir = opts.pkiDir ?? program.opts<ConnectionFlags>().pkiDir;
      if (!dir) throw new ConfigurationError('mcctl pki operator needs --pki-dir DIR, the directory mcctl pki init wrote');
      write(await (await commands.pki()).pkiOperatorCommand(dir, name, opts.role, opts.pool));
    });
  pki.command('replica').description('issue an mcplane-server replica\'s etcd client certificate (O=mcplane:replicas, CN=mcplane-replica@NAME) from an existing CA')
    .argument('<name>')
    .option('--pki-dir <dir>', 'the directory mcctl pki init wrote')
    .action(async (name: string, opts: { pkiDir?: string }) => {
      const dir = opts.pkiDir ?? program.opts<ConnectionFlags>().pkiDir;
      if (!dir) throw new ConfigurationError('mcctl pki replica needs --pki-dir DIR, the directory mcctl pki init wrote');
      write(await (await commands.pki()).pkiReplicaCommand(dir, name));
    });
  const caCmd = pki.command('ca').description('CA rollover with overlap: rotate (add a next CA to the bundle), promote (it signs), retire (the old leaves the bundle)');
  caCmd.command('rotate').argument('<dir>', 'the directory mcctl pki init wrote').description('make a next CA and add it to ca.crt; the current CA still signs')
    .action(async (dir: string) => write(await (await commands.pki()).pkiCaRotateCommand(dir)));
  caCmd.command('promote').argument('<dir>', 'the directory mcctl pki init wrote').description('make the next CA the one that signs (ca.key); the old stays trusted')
    .action(async (dir: string) => write(await (await commands.pki()).pkiCaPromoteCommand(dir)));
  caCmd.command('retire').argument('<dir>', 'the directory mcctl pki init wrote').description('drop every CA but the signing one from ca.crt, and issue server.crt and admin.crt again with it')
    .action(async (dir: string) => write(await (await commands.pki()).pkiCaRetireCommand(dir)));
  const token = pki.command('token').description('bootstrap tokens: each serves one pool\'s config on the bootstrap endpoint');
  connectionOptions(token.command('create')).description('make a bootstrap token for one pool (printed once; list them with mcctl get tokens, remove with mcctl delete token ID)')
    .requiredOption('--pool <pool>', 'the one pool the token serves: a worker\'s token cannot fetch master\'s config')
    .option('--ttl <duration>', 'how long it is valid, e.g. 24h or 7d (default: until deleted)')
    .option('--description <text>', 'what the token is for, shown by mcctl get tokens')
    .action(async (opts: { pool: string; ttl?: string; description?: string }) => withClients(async (c) => (await commands.identity()).tokenCreateCommand(c, opts, io.err)));

  for (const [cmd, lines] of Object.entries(COMMAND_EXAMPLES)) {
    const found = findCommand(program, cmd);
    if (!found) throw new Error(`examples for "${cmd}", which is no command`);
    examples(found, lines);
  }
  finishHelp(program);
  return program;
}

function findCommand(program: Command, path: string): Command | undefined {
  let cmd: Command | undefined = program;
  for (const word of path.split(' ').slice(1)) cmd = cmd?.commands.find((c) => c.name() === word);
  return cmd;
}

/**
 * Help as kubectl's: Examples after the options, and a pointer to `mcctl options` instead of the
 * connection flags in every command. A mistake (an unknown flag, a missing argument) prints one
 * line, the usage, and where the help is, not the whole help.
 */
function finishHelp(cmd: Command): void {
  const path = commandPath(cmd);
  cmd.showHelpAfterError(`Usage: ${path} ${cmd.usage()}\nSee '${path} --help' for usage and examples.`);
  const lines = EXAMPLES.get(cmd);
  if (lines) cmd.addHelpText('after', `\nExamples:\n${lines.map((l) => `  ${l}`).join('\n')}`);
  if (CONNECTED.has(cmd) || cmd.parent === null) cmd.addHelpText('after', '\nUse "mcctl options" for the connection flags (--server, --pki-dir, --context, --request-timeout, ...).');
  for (const sub of cmd.commands) finishHelp(sub);
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
  // A reader that went away (`mcctl get nodes | head`) ends the output, as for any Unix tool:
  // exit quietly instead of an unhandled EPIPE's stack trace.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw err;
    });
  }
  void main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
}
