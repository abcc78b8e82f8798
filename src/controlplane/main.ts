// mcplane-server: flags, or a YAML config file (--config), or both (flags win).

import { Command, Option } from 'commander';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { parse } from 'yaml';
import { ConfigurationError } from '../machineconfig/index.ts';
import { createLogger } from '../runtime/logger.ts';
import { identityOf, REPLICA_CN_PREFIX, ROLE_ADMIN, ROLE_NODE, ROLE_REPLICA } from '../runtime/pki.ts';
import { onStopSignal, runProgram } from '../runtime/entry-point.ts';
import { VERSION } from '../runtime/version.ts';
import { DEFAULT_BOOTSTRAP_PORT } from './api/bootstrap-server.ts';
import { durationMs } from '../machineconfig/duration.ts';
import { parseAutoApproveRules } from './api/enrollment-requests.ts';
import { backupMain } from './backup-command.ts';
import { caKeyIfPresent, startServer, type ServerOptions } from './server.ts';
import { inClusterAvailable } from './kubernetes/kube-client.ts';
// Start the status thread or the etcd lease thread when this file runs as one (a bundle's
// worker, told by its workerData.role); nothing otherwise.
import './api/status-thread-main.ts';
import './store/etcd-lease-thread-main.ts';

interface Flags {
  config?: string;
  dataDir?: string;
  store?: string;
  etcdCa?: string;
  etcdCert?: string;
  etcdKey?: string;
  etcdPrefix?: string;
  etcdAllowPlaintext?: boolean;
  replicaName?: string;
  leaseTtl?: string | number;
  listen?: string;
  statusListen?: string;
  pkiDir?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  caKey?: string;
  bootstrapTokenFile?: string;
  insecure?: boolean;
  bootstrap?: boolean;
  bootstrapListen?: string;
  advertise?: string;
  bootstrapAdvertise?: string;
  logLevel?: string;
  metricsListen?: string;
  metricsAllowNonLoopback?: boolean;
  kubeconfig?: string;
  kubernetesSource?: boolean;
  /** POOL=GLOB strings from the flag; in the config file those or {pool, nodeNamePattern} objects. */
  enrollmentAutoApprove?: unknown[];
  nodeCertificateLifetime?: string;
  auditRetention?: string;
  auditMaxRecords?: string | number;
}

/** The config file uses the flags' names in camelCase: dataDir, listen, pkiDir, ... */
export function resolveOptions(flags: Flags): ServerOptions & { logLevel?: string } {
  let file: Flags = {};
  if (flags.config) {
    try {
      file = (parse(readFileSync(flags.config, 'utf8')) ?? {}) as Flags;
    } catch (err) {
      throw new ConfigurationError(`--config ${flags.config}: ${(err as Error).message}`);
    }
  }
  const f: Flags = { ...file, ...Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined)) };
  const pki = f.pkiDir;
  const tlsCa = f.tlsCa ?? (pki && join(pki, 'ca.crt'));
  const tlsCert = f.tlsCert ?? (pki && join(pki, 'server.crt'));
  const tlsKey = f.tlsKey ?? (pki && join(pki, 'server.key'));
  const caKey = f.caKey ?? (pki && join(pki, 'ca.key'));
  // An explicit --ca-key must be readable (the server says so at start); the one --pki-dir
  // implies is used when present: a replica without it cannot sign, and says so to agents.
  const signingKey = f.caKey ?? caKeyIfPresent(pki && join(pki, 'ca.key'));
  const tokenFile = f.bootstrapTokenFile ?? (pki && join(pki, 'bootstrap-token'));
  const options: ServerOptions & { logLevel?: string } = {
    dataDir: f.dataDir ?? '/var/lib/mcplane-server',
    listen: f.listen ?? '0.0.0.0:7443',
    insecure: f.insecure ?? false,
  };
  if (f.logLevel) options.logLevel = f.logLevel;
  if (f.statusListen) options.statusListen = f.statusListen;
  if (f.nodeCertificateLifetime !== undefined) {
    const ms = durationMs(String(f.nodeCertificateLifetime));
    if (ms === undefined || ms < 1000) throw new ConfigurationError(`--node-certificate-lifetime ${f.nodeCertificateLifetime}: expected a duration such as 90d, 30d, 12h (at least 1s)`);
    options.nodeCertificateLifetimeMs = ms;
  }
  if (f.auditRetention !== undefined) {
    const ms = durationMs(String(f.auditRetention));
    if (ms === undefined || ms < 60_000) throw new ConfigurationError(`--audit-retention ${f.auditRetention}: expected a duration such as 30d, 90d, 12h (at least 1m)`);
    (options.audit ??= {}).retentionMs = ms;
  }
  if (f.auditMaxRecords !== undefined) {
    const n = Number(f.auditMaxRecords);
    if (!Number.isInteger(n) || n < 1 || n > 1_000_000) throw new ConfigurationError(`--audit-max-records ${f.auditMaxRecords}: expected a whole number from 1 to 1000000`);
    (options.audit ??= {}).maxRecords = n;
  }
  if (f.metricsListen) options.metrics = { listen: f.metricsListen, allowNonLoopback: f.metricsAllowNonLoopback === true };
  else if (f.metricsAllowNonLoopback) throw new ConfigurationError('--metrics-allow-non-loopback needs --metrics-listen HOST:PORT');
  // A pod's service account is used without a flag, as kubectl and client libraries do.
  if (f.kubeconfig) options.kubernetes = { kubeconfig: f.kubeconfig };
  else if (inClusterAvailable(process.env)) options.kubernetes = { inCluster: { env: process.env } };
  if (f.kubernetesSource) options.kubernetesSource = true;
  if (f.replicaName) options.replicaName = f.replicaName;
  if (f.leaseTtl !== undefined) {
    // etcd rounds a TTL below its minimum (1.5 s with default timings) up; 1 s is the floor here.
    const seconds = Number(f.leaseTtl);
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > 300) throw new ConfigurationError(`--lease-ttl ${f.leaseTtl}: expected whole seconds from 1 to 300`);
    options.leaseTtlMs = seconds * 1000;
  }
  if (f.store) options.etcd = parseStoreUrl(f, tlsCa);
  else if (f.etcdCa || f.etcdCert || f.etcdKey) throw new ConfigurationError('--etcd-ca/--etcd-cert/--etcd-key need --store etcd://HOST:PORT[,HOST:PORT...]');
  else if (f.etcdAllowPlaintext) throw new ConfigurationError('--etcd-allow-plaintext needs --store etcd://HOST:PORT[,HOST:PORT...]');
  if (tlsCa || tlsCert || tlsKey) {
    if (!tlsCa || !tlsCert || !tlsKey) throw new ConfigurationError('--tls-ca, --tls-cert and --tls-key go together (or use --pki-dir)');
    options.tls = { ca: tlsCa, cert: tlsCert, key: tlsKey };
    if (signingKey && !options.insecure) options.caKeyFile = signingKey;
  }
  if (f.bootstrap !== false && options.tls && !options.insecure && caKey && tokenFile) {
    options.bootstrap = { listen: f.bootstrapListen ?? `0.0.0.0:${DEFAULT_BOOTSTRAP_PORT}`, caKeyFile: caKey, tokenFile };
    if (f.advertise) options.bootstrap.grpcAdvertise = f.advertise;
    if (f.bootstrapAdvertise) options.bootstrap.advertise = f.bootstrapAdvertise;
  }
  const autoApprove = parseAutoApproveRules(f.enrollmentAutoApprove, flags.enrollmentAutoApprove ? '--enrollment-auto-approve' : `${flags.config}: enrollmentAutoApprove`);
  if (autoApprove.length) {
    // Requests are made and approved on the bootstrap endpoint: a rule without it would never apply.
    if (!options.bootstrap) throw new ConfigurationError('--enrollment-auto-approve needs the bootstrap endpoint (TLS, the CA key and a token file, without --no-bootstrap)');
    options.bootstrap.autoApprove = autoApprove;
  }
  return options;
}

/**
 * `etcd://HOST:PORT[,HOST:PORT...]`, with TLS files when etcd asks for client certificates.
 * Plaintext to an address off loopback is refused by the store unless --etcd-allow-plaintext.
 */
function parseStoreUrl(f: Flags, mcplaneCa: string | undefined): NonNullable<ServerOptions['etcd']> {
  const m = /^etcd:\/\/(.+)$/.exec(f.store!);
  const endpoints = m ? m[1]!.split(',').map((e) => e.trim()).filter(Boolean) : [];
  const bad = endpoints.filter((e) => !/^(\[[0-9a-fA-F:.]+\]|[^:/\s]+):\d{1,5}$/.test(e));
  if (!m || endpoints.length === 0 || bad.length) {
    throw new ConfigurationError(`--store ${f.store}: expected etcd://HOST:PORT[,HOST:PORT...]${bad.length ? ` (not HOST:PORT: ${bad.join(', ')})` : ''}; leave --store out for SQLite in --data-dir`);
  }
  const etcd: NonNullable<ServerOptions['etcd']> = { endpoints };
  if (f.etcdPrefix) etcd.prefix = f.etcdPrefix;
  if (f.etcdAllowPlaintext) etcd.allowPlaintext = true;
  const files = [f.etcdCa, f.etcdCert, f.etcdKey];
  if (files.some(Boolean)) {
    if (!files.every(Boolean)) throw new ConfigurationError('--etcd-ca, --etcd-cert and --etcd-key go together');
    const read = (file: string, what: string): Buffer => {
      try {
        return readFileSync(file);
      } catch (err) {
        throw new ConfigurationError(`${what} ${file}: ${(err as Error).message}`);
      }
    };
    etcd.tls = { ca: read(f.etcdCa!, '--etcd-ca'), cert: read(f.etcdCert!, '--etcd-cert'), key: read(f.etcdKey!, '--etcd-key') };
    checkReplicaIdentity(etcd.tls.cert, f.etcdCert!, mcplaneCa);
  }
  return etcd;
}

/**
 * The replica's own etcd client certificate must be a replica's. An etcd that trusts mcplane's
 * CA (--client-cert-auth --trusted-ca-file=ca.crt) accepts every certificate that CA signed,
 * node certificates included; the replica refuses to run as a node or an operator, so a node
 * credential handed to a replica by mistake is found at start-up, not after it has led. etcd
 * itself refuses node certificates only with its auth enabled and users for replicas' CNs only
 * (see mcctl pki replica). A certificate from another CA (etcd's own PKI) is etcd's business.
 */
function checkReplicaIdentity(certPem: Buffer, file: string, mcplaneCa: string | undefined): void {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch (err) {
    throw new ConfigurationError(`--etcd-cert ${file}: not a PEM certificate (${(err as Error).message})`);
  }
  const id = identityOf(certPem);
  const subject = `CN=${id.commonName}${id.organization ? `, O=${id.organization}` : ''}`;
  const make = `a replica's etcd identity is a replica certificate (O=${ROLE_REPLICA}, CN=${REPLICA_CN_PREFIX}NAME): make one with mcctl pki replica NAME --pki-dir DIR`;
  if (id.organization === ROLE_NODE || id.organization === ROLE_ADMIN) {
    throw new ConfigurationError(`--etcd-cert ${file} (${subject}) is ${id.organization === ROLE_NODE ? 'a node' : 'an operator'} certificate; ${make}`);
  }
  if (id.organization === ROLE_REPLICA) {
    if (!id.commonName.startsWith(REPLICA_CN_PREFIX) || id.commonName.length === REPLICA_CN_PREFIX.length) {
      throw new ConfigurationError(`--etcd-cert ${file} (${subject}): a replica certificate's CN must be ${REPLICA_CN_PREFIX}NAME, the etcd user it is mapped to; ${make}`);
    }
    return;
  }
  let ca: X509Certificate | undefined;
  try {
    ca = mcplaneCa ? new X509Certificate(readFileSync(mcplaneCa)) : undefined;
  } catch {
    // An unreadable --tls-ca is reported by the server's own TLS set-up, naming that flag.
  }
  if (ca && cert.checkIssued(ca) && cert.verify(ca.publicKey)) {
    throw new ConfigurationError(`--etcd-cert ${file} (${subject}) was issued by mcplane's CA (${mcplaneCa}) but is not a replica certificate; ${make}`);
  }
}

/** The server's flags (also read by scripts/gen-reference.ts for docs/reference/flags.md). */
export function serverCommand(): Command {
  return new Command('mcplane-server')
    .description('mcplane control plane: stores MachineConfigs, renders pools, rolls out configs over gRPC')
    .version(VERSION, '--version')
    .option('--config <file>', 'YAML config file (keys are the flags in camelCase)')
    .option('--data-dir <dir>', 'where the SQLite store lives (default /var/lib/mcplane-server)')
    .option('--store <url>', 'etcd://HOST:PORT[,HOST:PORT...] to run as one of several replicas on etcd (default: SQLite in --data-dir)')
    .option('--etcd-ca <file>', 'CA that etcd\'s certificate chains to')
    .option('--etcd-cert <file>', 'client certificate for etcd')
    .option('--etcd-key <file>', 'client key for etcd')
    .option('--etcd-prefix <prefix>', 'key prefix in etcd (default /mcplane/), to share one etcd')
    .option('--etcd-allow-plaintext', 'let --store use plaintext etcd (no --etcd-ca/--etcd-cert/--etcd-key) at an address other than loopback: every replica write travels unauthenticated and unencrypted')
    .option('--replica-name <name>', 'this replica\'s name among several (default: host name and gRPC port)')
    .option('--lease-ttl <seconds>', 'this replica\'s lease TTL: how long a dead or cut-off replica still counts as alive and leading (default 5)')
    .option('--listen <host:port>', 'gRPC address (default 0.0.0.0:7443)')
    .option('--status-listen <host:port>', 'also serve status reads (mcctl get, describe, -w; the dashboard) on this address, from a thread of their own: they do not wait for agent streams and controllers (default: off; clients use it with mcctl --status-server)')
    .option('--pki-dir <dir>', 'directory made by `mcctl pki init` (ca.crt, server.crt, server.key, ca.key, bootstrap-token)')
    .option('--tls-ca <file>', 'CA that client certificates must chain to')
    .option('--tls-cert <file>', 'server certificate')
    .option('--tls-key <file>', 'server private key')
    .option('--ca-key <file>', 'CA private key, to sign node certificates at enrollment and renewal (default: ca.key in --pki-dir, when there)')
    .option('--node-certificate-lifetime <duration>', 'lifetime of the node certificates this server issues, e.g. 90d, 30d, 12h (default 90d); agents renew at two thirds of it')
    .option('--audit-retention <duration>', 'how long the audit trail (mcctl get audit) keeps a record, e.g. 30d, 90d (default 30d)')
    .option('--audit-max-records <n>', 'the most audit records kept; the oldest go first (default 10000)')
    .option('--bootstrap-token-file <file>', 'bootstrap tokens, one per line')
    .option('--insecure', 'plaintext gRPC, only on a loopback --listen (development)')
    .option('--no-bootstrap', 'do not serve the Ignition bootstrap endpoint')
    .option('--bootstrap-listen <host:port>', `bootstrap endpoint address (default 0.0.0.0:${DEFAULT_BOOTSTRAP_PORT})`)
    .option('--advertise <host:port>', 'gRPC address written into bootstrapped hosts\' agent config')
    .option('--bootstrap-advertise <host:port>', 'bootstrap address written into bootstrapped hosts\' agent config')
    .option('--enrollment-auto-approve <pool=glob>', 'approve enrollment requests for POOL from hosts whose name matches GLOB (* and ?) at once; repeatable; master only when named', (value: string, previous: string[] = []) => [...previous, value])
    .option('--metrics-listen <host:port>', 'serve Prometheus metrics over plain HTTP at http://HOST:PORT/metrics (default: off; loopback addresses only)')
    .option('--metrics-allow-non-loopback', 'let --metrics-listen use an address other than loopback (unauthenticated plain HTTP: firewall it)')
    .option('--kubeconfig <file>', 'kubeconfig of an existing Kubernetes cluster to work with (default: the pod\'s service account when run in a cluster)')
    .option('--kubernetes-source', 'take MachineConfigs and MachineConfigPools from the Kubernetes cluster (watched; mcctl apply/delete of them is refused) and write pool status back to it')
    .addOption(new Option('--log-level <level>', 'log level').choices(['trace', 'debug', 'info', 'warn', 'error']))
    .addHelpText('after', '\nThe SQLite store, offline tools (see --help of each):\n  mcplane-server backup --to FILE      an online copy of the store\n  mcplane-server restore --from FILE   put a copy back (server stopped)')
    .showHelpAfterError();
}

export async function main(argv: string[]): Promise<void> {
  // Offline commands on the SQLite store, each its own small program (backup-command.ts).
  if (argv[0] === 'backup' || argv[0] === 'restore') return backupMain(argv);
  const program = serverCommand();
  program.parse(argv, { from: 'user' });
  const options = resolveOptions(program.opts<Flags>());
  const log = createLogger({ name: 'mcplane-server', level: options.logLevel });
  // Signals are caught from the start: a SIGTERM that arrives while the last steps of start-up
  // run (the leader's first writes) must stop the server cleanly, not kill it mid-write.
  const starting = startServer({ ...options, log });
  // SIGHUP reads the certificates again (the default action would end the process).
  process.on('SIGHUP', () => {
    void starting.then((server) => {
      const changed = server.reloadCertificates();
      log.info({ changed }, 'SIGHUP: certificates read again');
    }, () => undefined);
  });
  onStopSignal(async (signal) => {
    log.info({ signal }, 'signal received');
    const server = await starting.catch(() => undefined);
    if (!server) return 1;
    try {
      await server.close();
      return 0;
    } catch (err) {
      log.error({ err }, 'shutdown failed');
      return 1;
    }
  });
  await starting;
}

// In a bundle, the server's threads run this same file (api/status-thread-main.ts says why).
if (isMainThread) runProgram(import.meta.url, 'mcplane-server', main);
