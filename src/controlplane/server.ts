// Starts and stops a whole control plane: store, controllers, gRPC and the bootstrap endpoint.

import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { Server as HttpsServer } from 'node:https';
import { ConfigurationError } from '../machineconfig/index.ts';
import { createLogger, type Logger } from '../runtime/logger.ts';
import { checkMetricsListen, startMetricsServer, type MetricsServer } from '../runtime/metrics-http.ts';
import { DEFAULT_NODE_CERTIFICATE_LIFETIME_MS, signerCertificate, signNodeCertificate, type KeyPairPem } from '../runtime/pki.ts';
import { isLoopbackHost, parseHostPort, ReloadingTls, serverCredentials, type TlsFiles } from '../runtime/tls.ts';
import { reachableAddress, startBootstrapServer } from './api/bootstrap-server.ts';
import { parseBootstrapTokenFile } from './api/bootstrap-tokens.ts';
import { caSigner, describeRule, type AutoApproveRule } from './api/enrollment-requests.ts';
import type { Clock } from './replica/clock.ts';
import { ControlPlane, type ControlPlaneOptions } from './control-plane.ts';
import { ConfigCommands } from './api/config-commands.ts';
import { shutdownGracefully, startGrpcServer, SERVICE_NAMES, type GrpcServerHandle } from './api/grpc-server.ts';
import { startStatusThread, type StatusThread } from './api/status-thread.ts';
import { AuditTrail, type AuditOptions } from './api/audit-trail.ts';
import type { RateLimit } from '../runtime/rate-limiter.ts';
import { openStore, type StoreOptions } from './store/open-store.ts';
import { loadKubernetesAccess, type KubernetesCredentials } from './kubernetes/kube-client.ts';

export interface ServerOptions {
  dataDir: string;
  /** etcd endpoints and TLS; absent: SQLite in dataDir. */
  etcd?: StoreOptions['etcd'];
  /** This replica's name among several (default: host name and gRPC port). */
  replicaName?: string;
  /** Lease TTL of this replica (leader failover time); tests shorten it. */
  leaseTtlMs?: number;
  /** host:port for gRPC; port 0 picks a free one. */
  listen: string;
  tls?: TlsFiles;
  /**
   * The CA's private key: this replica signs node certificates (at enrollment and at renewal)
   * with the CA in `tls.ca` whose key this is. Absent: the bootstrap endpoint's, else none
   * (renewals are refused here and agents ask another replica).
   */
  caKeyFile?: string;
  /** Lifetime of the node certificates this server issues (default 90 days). */
  nodeCertificateLifetimeMs?: number;
  /**
   * How often the TLS files and the CA key are checked for changes (default 10 s; SIGHUP, i.e.
   * ServerHandle.reloadCertificates, reads them at once).
   */
  certificateWatchMs?: number;
  /** Plaintext gRPC; refused unless `listen` is a loopback address. */
  insecure?: boolean;
  /**
   * host:port for StatusService served by a thread of its own (api/status-thread.ts), with the
   * same TLS as `listen`; port 0 picks a free one. Absent: reads are served on `listen` only.
   */
  statusListen?: string;
  bootstrap?: {
    listen: string;
    caKeyFile: string;
    tokenFile: string;
    /** host:port agents use to reach gRPC; defaults to `listen`. */
    grpcAdvertise?: string;
    /** host:port hosts use to reach this endpoint; defaults to its `listen`. */
    advertise?: string;
    tokenTtlMs?: number;
    issueRate?: RateLimit;
    /** Failed bootstrap requests allowed per client address and per token (tests raise it). */
    failureRate?: RateLimit;
    /** --enrollment-auto-approve: enrollment requests approved at once. */
    autoApprove?: AutoApproveRule[];
    /** Enrollment requests per client address (tests raise it). */
    requestRate?: RateLimit;
    /** Enrollment requests pending at once (default 1,000; tests lower it). */
    maxPendingRequests?: number;
    /** How long an enrollment request waits for a decision (default 24 h; tests shorten it). */
    requestTtlMs?: number;
    /** Refusals logged per client address (tests raise it). */
    refusalLogRate?: RateLimit;
    /** Enrollment requests per network and in all (tests change them). */
    requestNetworkRate?: RateLimit;
    requestTotalRate?: RateLimit;
    /** How long a request lives unpolled, and an auto-approved host has to connect (default 15 min; tests shorten it). */
    requestIdleTtlMs?: number;
  };
  /** How often the leader deletes expired enrollment tokens (default 10 min). */
  tokenSweepMs?: number;
  /**
   * Watch events a slow Watch client (mcctl get -w, the dashboard) may leave unread beyond its
   * initial list before its stream is cut (default 1,024; tests lower it).
   */
  watchBacklog?: number;
  /** The time decisions read; tests pass a ManualClock (no flag: production runs on real time). */
  clock?: Clock;
  /** Prometheus /metrics over plain HTTP (off when absent); loopback only unless allowNonLoopback. */
  metrics?: { listen: string; allowNonLoopback?: boolean };
  log?: Logger;
  /** Credentials for an existing Kubernetes cluster (--kubeconfig, or in-cluster). */
  kubernetes?: KubernetesCredentials;
  /** Drain retry and poll timing; tests shorten it (no flag: the defaults suit a cluster). */
  drain?: ControlPlaneOptions['drain'];
  /** --kubernetes-source: take MachineConfigs and pools from that cluster. */
  kubernetesSource?: boolean;
  /** --audit-retention, --audit-max-records: how long and how many audit records are kept. */
  audit?: Partial<AuditOptions>;
}

export interface ServerHandle {
  controlPlane: ControlPlane;
  grpcPort: number;
  bootstrapPort?: number;
  /** The /metrics port, when --metrics-listen was given. */
  metricsPort?: number;
  /** The status thread's port, when --status-listen was given. */
  statusPort?: number;
  /**
   * Reads the TLS files and the CA key again (SIGHUP): new handshakes use the new server
   * certificate and trust bundle, open streams stay. True when something changed.
   */
  reloadCertificates(): boolean;
  /** Stops taking work, finishes in-flight calls and writes, closes the store. */
  close(graceMs?: number): Promise<void>;
}

export async function startServer(options: ServerOptions): Promise<ServerHandle> {
  const log = options.log ?? createLogger({ name: 'mcplane-server' });
  const { host } = parseHostPort(options.listen, '--listen');
  if (!options.tls && !options.insecure) {
    throw new ConfigurationError('TLS is required: give --pki-dir DIR or --tls-ca/--tls-cert/--tls-key (plaintext only with --insecure on a loopback --listen)');
  }
  if (options.insecure && !isLoopbackHost(host)) {
    throw new ConfigurationError(`--insecure serves plaintext and is allowed only on a loopback address; --listen ${options.listen} is not one`);
  }
  const statusHost = options.statusListen ? parseHostPort(options.statusListen, '--status-listen').host : undefined;
  if (options.insecure && statusHost !== undefined && !isLoopbackHost(statusHost)) {
    throw new ConfigurationError(`--insecure serves plaintext and is allowed only on a loopback address; --status-listen ${options.statusListen} is not one`);
  }
  const reloading = options.tls && !options.insecure ? new ReloadingTls(options.tls, 'server TLS', (message) => log.error(message)) : undefined;
  const tls = reloading?.material;
  const lifetime = options.nodeCertificateLifetimeMs ?? DEFAULT_NODE_CERTIFICATE_LIFETIME_MS;
  if (!(lifetime >= 1000)) throw new ConfigurationError('--node-certificate-lifetime must be at least 1s (agents renew at two thirds of it)');
  // Seconds are for tests: every agent renews every two thirds of it, each renewal a commit.
  if (lifetime < 3_600_000) log.warn({ lifetimeMs: lifetime }, 'node certificates live less than an hour: agents renew at two thirds of that');
  const caKeyFile = options.caKeyFile ?? options.bootstrap?.caKeyFile;
  // One object, updated in place on reload: the bootstrap endpoint and renewals sign with the
  // CA (and bundle) read last.
  const signingCa: KeyPairPem | undefined = reloading && caKeyFile ? readSigningCa(reloading.material.ca.toString(), caKeyFile, options.tls!.ca, lifetime) : undefined;
  const reloadCertificates = (): boolean => {
    if (!reloading) return false;
    let changed = reloading.reload();
    if (signingCa && caKeyFile) {
      try {
        const next = readSigningCa(reloading.material.ca.toString(), caKeyFile, options.tls!.ca, lifetime);
        if (next.certPem !== signingCa.certPem || next.keyPem !== signingCa.keyPem) {
          Object.assign(signingCa, next);
          changed = true;
          log.info({ signer: caSubject(next) }, 'CA key or trust bundle reloaded: new node certificates are signed by this CA');
        }
      } catch (err) {
        log.error({ err: (err as Error).message }, 'the CA key does not fit the trust bundle; still signing with the CA read before');
      }
    }
    return changed;
  };
  const metricsListen = options.metrics && { ...options.metrics, setting: '--metrics-listen', optIn: '--metrics-allow-non-loopback' };
  // Refused before anything starts, like a plaintext --listen.
  if (metricsListen) checkMetricsListen(metricsListen);
  // Bad credentials stop the server before it opens anything, with the file named.
  const kubernetes = options.kubernetes ? await loadKubernetesAccess(options.kubernetes) : undefined;
  if (options.kubernetesSource && !kubernetes) {
    throw new ConfigurationError('--kubernetes-source needs a cluster: give --kubeconfig FILE (or run in a pod with a service account)');
  }
  if (kubernetes) log.info({ kubernetes: kubernetes.server, credentials: kubernetes.credentials }, 'working with a Kubernetes cluster');

  // The CA key is read before anything starts: the control plane signs approved enrollment
  // requests with it, and the bootstrap endpoint signs enrollments.
  if (options.bootstrap && !tls) throw new ConfigurationError('the bootstrap endpoint needs TLS; it cannot run with --insecure');
  const ca = signingCa;
  const store = await openStore({ dataDir: options.dataDir, ...(options.etcd ? { etcd: options.etcd } : {}), log });
  let cp: ControlPlane | undefined;
  let bootstrap: HttpsServer | undefined;
  let grpc: GrpcServerHandle | undefined;
  let metrics: MetricsServer | undefined;
  let statusThread: StatusThread | undefined;
  try {
    // The port is bound first: the replica advertises the address it really listens on.
    grpc = await startGrpcServer(options.listen, reloading ? reloading.serverCredentials() : serverCredentials(undefined), log);
    const address = reachableAddress(host, grpc.port);
    cp = await ControlPlane.start(store, {
      replicaName: options.replicaName ?? address,
      address,
      ...(options.leaseTtlMs ? { leaseTtlMs: options.leaseTtlMs } : {}),
      ...(options.tokenSweepMs ? { tokenSweepMs: options.tokenSweepMs } : {}),
      ...(options.watchBacklog ? { watchBacklog: options.watchBacklog } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
      ...(kubernetes ? { kubernetes } : {}),
      ...(options.drain ? { drain: options.drain } : {}),
      ...(options.kubernetesSource ? { kubernetesSource: true } : {}),
    }, log);
    const commands = new ConfigCommands(cp.cache, {
      clock: cp.clock,
      ...(options.kubernetesSource ? { sourceCluster: kubernetes?.server ?? 'the cluster' } : {}),
    }, log);
    const audit = new AuditTrail(store, log, cp.serving.name, options.audit);
    grpc.serve({ reads: cp, replica: cp.serving, agents: cp.agents, config: commands, identity: { revokeNode: commands.revokeNode.bind(commands), certificateSigner: ca ? caSigner(ca) : undefined }, audit }, tls !== undefined);
    if (reloading) {
      // The gauge follows what new handshakes are served: the material read last.
      const metrics = cp.metrics;
      metrics.servesWith(reloading.material);
      // Streams are held to the CAs new handshakes trust: a CA retired ends what it signed.
      const sessions = cp.sessions;
      sessions.trust(reloading.material.ca.toString());
      reloading.onChange((material) => {
        metrics.servesWith(material);
        sessions.trust(material.ca.toString());
      });
    }
    if (signingCa) {
      const ca = signingCa;
      cp.sessions.signer = {
        sign: (csr, node, pool, generation) => signNodeCertificate(ca, csr, node, pool, generation),
        bundle: () => ca.certPem,
      };
    }
    const health = grpc.health;
    // Health follows the replica from here on: the status thread, started below, is told the
    // state at its start and every change after.
    let serving = true;
    const setServing = (now: boolean): void => {
      serving = now;
      for (const s of ['', ...SERVICE_NAMES]) health.setStatus(s, now ? 'SERVING' : 'NOT_SERVING');
      statusThread?.setServing(now);
    };
    cp.replica.on('lost', () => setServing(false));
    cp.replica.on('ready', () => setServing(true));
    if (options.statusListen) {
      statusThread = await startStatusThread({
        listen: options.statusListen,
        ...(options.tls && !options.insecure ? { tls: options.tls } : {}),
        certificateWatchMs: options.certificateWatchMs ?? 10_000,
        store,
        replica: cp.serving,
        logLevel: log.level,
        log,
      });
      // The thread starts NOT_SERVING: it takes the main port's health now, changes while it
      // started included.
      statusThread.setServing(serving);
    }
    const status = statusThread;
    if (options.bootstrap && tls && ca) {
      const b = parseHostPort(options.bootstrap.listen, '--bootstrap-listen');
      const { tokens, warnings } = parseBootstrapTokenFile(readFileSync(options.bootstrap.tokenFile, 'utf8'), options.bootstrap.tokenFile);
      for (const warning of warnings) log.warn(warning);
      if (tokens.length === 0) log.info({ file: options.bootstrap.tokenFile }, 'the bootstrap token file holds no token: only tokens made with mcctl pki token create serve configs');
      bootstrap = await startBootstrapServer(cp, cp.serving, {
        tls: { cert: tls.cert, key: tls.key },
        ca,
        staticTokens: tokens,
        ...(options.bootstrap.grpcAdvertise ? { grpcAddress: options.bootstrap.grpcAdvertise } : {}),
        ...(options.bootstrap.advertise ? { bootstrapAddress: options.bootstrap.advertise } : {}),
        ...(options.bootstrap.tokenTtlMs ? { tokenTtlMs: options.bootstrap.tokenTtlMs } : {}),
        ...(options.bootstrap.issueRate ? { issueRate: options.bootstrap.issueRate } : {}),
        ...(options.bootstrap.failureRate ? { failureRate: options.bootstrap.failureRate } : {}),
        ...(options.bootstrap.autoApprove ? { autoApprove: options.bootstrap.autoApprove } : {}),
        ...(options.bootstrap.requestRate ? { requestRate: options.bootstrap.requestRate } : {}),
        ...(options.bootstrap.maxPendingRequests ? { maxPendingRequests: options.bootstrap.maxPendingRequests } : {}),
        ...(options.bootstrap.requestTtlMs ? { requestTtlMs: options.bootstrap.requestTtlMs } : {}),
        ...(options.bootstrap.refusalLogRate ? { refusalLogRate: options.bootstrap.refusalLogRate } : {}),
        ...(options.bootstrap.requestNetworkRate ? { requestNetworkRate: options.bootstrap.requestNetworkRate } : {}),
        ...(options.bootstrap.requestTotalRate ? { requestTotalRate: options.bootstrap.requestTotalRate } : {}),
        ...(options.bootstrap.requestIdleTtlMs ? { requestIdleTtlMs: options.bootstrap.requestIdleTtlMs } : {}),
      }, b.host.replace(/^\[|\]$/g, ''), b.port, log);
    }
    for (const rule of options.bootstrap?.autoApprove ?? []) {
      // Logged at every start: who may join without an operator is worth seeing in the journal.
      if (rule.pool === 'master') log.warn({ rule: describeRule(rule) }, 'enrollment requests for master matching this rule are approved without an operator: such hosts join the control plane\'s pool');
      else log.info({ rule: describeRule(rule) }, 'enrollment requests matching this rule are approved without an operator');
    }
    const bootstrapPort = bootstrap ? (bootstrap.address() as { port: number }).port : undefined;
    if (reloading) {
      const endpoint = bootstrap;
      reloading.onChange((m) => {
        log.info({ cert: options.tls!.cert, ca: options.tls!.ca }, 'server TLS files reloaded: new connections use them, open ones keep theirs');
        endpoint?.setSecureContext({ cert: m.cert, key: m.key });
      });
      reloading.watch(options.certificateWatchMs ?? 10_000);
    }
    if (metricsListen) {
      cp.metrics.collectProcessMetrics();
      metrics = await startMetricsServer({ ...metricsListen, registry: cp.metrics.registry, log });
    }
    log.info({ grpc: `${host}:${grpc.port}`, ...(status ? { status: `${statusHost}:${status.port}` } : {}), tls: tls !== undefined, bootstrapPort, ...(metrics ? { metrics: `http://${metrics.address}/metrics` } : {}), store: store.backend, replica: cp.replica.name, leader: cp.leading, ...(options.etcd ? {} : { dataDir: options.dataDir }) }, 'mcplane-server ready');

    const controlPlane = cp;
    const server = grpc;
    let closing: Promise<void> | undefined;
    return {
      controlPlane,
      grpcPort: grpc.port,
      bootstrapPort,
      ...(metrics ? { metricsPort: metrics.port } : {}),
      ...(status ? { statusPort: status.port } : {}),
      reloadCertificates() {
        status?.reloadCertificates();
        return reloadCertificates();
      },
      close(graceMs = 1500) {
        closing ??= (async () => {
          log.info('shutting down: no new calls, finishing in-flight ones');
          reloading?.close();
          setServing(false);
          bootstrap?.close();
          await metrics?.close();
          // Long-lived calls never end on their own: Watch streams get a status saying why, agent
          // streams end so agents reconnect elsewhere.
          controlPlane.lifecycle.emit('shutdown');
          controlPlane.sessions.closeAll();
          const statusClosed = status?.close(graceMs);
          await shutdownGracefully(server.server, graceMs);
          bootstrap?.closeAllConnections();
          await statusClosed;
          await controlPlane.stop();
          await store.close();
          log.info('stopped');
        })();
        return closing;
      },
    };
  } catch (err) {
    reloading?.close();
    bootstrap?.close();
    await metrics?.close();
    grpc?.server.forceShutdown();
    await statusThread?.close(0);
    await cp?.stop();
    await store.close();
    throw err;
  }
}

/**
 * The signer: the trust bundle (which during a CA rollover holds several CAs) and the CA key; the
 * CA that signs is the bundle's certificate for that key.
 */
function readSigningCa(bundlePem: string, caKeyFile: string, caFile: string, nodeLifetimeMs: number): KeyPairPem {
  let keyPem: string;
  try {
    keyPem = readFileSync(caKeyFile, 'utf8');
  } catch (err) {
    throw new ConfigurationError(`--ca-key: cannot read ${caKeyFile}: ${(err as Error).message}`);
  }
  let signer: string | undefined;
  try {
    signer = signerCertificate(bundlePem, keyPem);
  } catch (err) {
    throw new ConfigurationError(`--ca-key ${caKeyFile}: not a private key (${(err as Error).message})`);
  }
  if (!signer) throw new ConfigurationError(`--ca-key ${caKeyFile} is the key of no CA certificate in ${caFile}; after mcctl pki ca promote, the new CA must be in the bundle`);
  return { certPem: bundlePem, keyPem, nodeLifetimeMs };
}

function caSubject(ca: KeyPairPem): string {
  const pem = signerCertificate(ca.certPem, ca.keyPem);
  return pem ? new X509Certificate(pem).subject.replaceAll('\n', ', ') : '';
}

/** The CA key named by --pki-dir is used only when it is there: a replica may run without it. */
export function caKeyIfPresent(path: string | undefined): string | undefined {
  return path && existsSync(path) ? path : undefined;
}
