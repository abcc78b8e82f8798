// Starts and stops a whole control plane: store, controllers, gRPC and the bootstrap endpoint.

import { readFileSync } from 'node:fs';
import type { Server as HttpsServer } from 'node:https';
import { ConfigurationError } from '../machineconfig/index.ts';
import { createLogger, type Logger } from '../runtime/logger.ts';
import { checkMetricsListen, startMetricsServer, type MetricsServer } from '../runtime/metrics-http.ts';
import { isLoopbackHost, parseHostPort, readTlsFiles, serverCredentials, type TlsFiles } from '../runtime/tls.ts';
import { reachableAddress, startBootstrapServer } from './bootstrap-server.ts';
import { parseBootstrapTokenFile } from './bootstrap-tokens.ts';
import { caSigner, describeRule, type AutoApproveRule } from './enrollment-requests.ts';
import type { KeyPairPem } from '../runtime/pki.ts';
import type { Clock } from './clock.ts';
import { ControlPlane, type ControlPlaneOptions } from './control-plane.ts';
import { startGrpcServer, SERVICE_NAMES, type GrpcServerHandle } from './grpc/grpc-server.ts';
import type { RateLimit } from './rate-limiter.ts';
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
  /** Plaintext gRPC; refused unless `listen` is a loopback address. */
  insecure?: boolean;
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
  };
  /** How often the leader deletes expired enrollment tokens (default 10 min). */
  tokenSweepMs?: number;
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
}

export interface ServerHandle {
  controlPlane: ControlPlane;
  grpcPort: number;
  bootstrapPort?: number;
  /** The /metrics port, when --metrics-listen was given. */
  metricsPort?: number;
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
  const tls = options.tls && !options.insecure ? readTlsFiles(options.tls, 'server TLS') : undefined;
  const metricsListen = options.metrics && { ...options.metrics, setting: '--metrics-listen', optIn: '--metrics-allow-non-loopback' };
  // Refused before anything starts, like a plaintext --listen.
  if (metricsListen) checkMetricsListen(metricsListen);
  // Bad credentials stop the server before it opens anything, with the file named.
  const kubernetes = options.kubernetes ? loadKubernetesAccess(options.kubernetes) : undefined;
  if (options.kubernetesSource && !kubernetes) {
    throw new ConfigurationError('--kubernetes-source needs a cluster: give --kubeconfig FILE (or run in a pod with a service account)');
  }
  if (kubernetes) log.info({ kubernetes: kubernetes.server, credentials: kubernetes.credentials }, 'working with a Kubernetes cluster');

  // The CA key is read before anything starts: the control plane signs approved enrollment
  // requests with it, and the bootstrap endpoint signs enrollments.
  let ca: KeyPairPem | undefined;
  if (options.bootstrap) {
    if (!tls) throw new ConfigurationError('the bootstrap endpoint needs TLS; it cannot run with --insecure');
    ca = { certPem: tls.ca.toString(), keyPem: readFileSync(options.bootstrap.caKeyFile, 'utf8') };
  }
  const store = await openStore({ dataDir: options.dataDir, ...(options.etcd ? { etcd: options.etcd } : {}), log });
  let cp: ControlPlane | undefined;
  let bootstrap: HttpsServer | undefined;
  let grpc: GrpcServerHandle | undefined;
  let metrics: MetricsServer | undefined;
  try {
    // The port is bound first: the replica advertises the address it really listens on.
    grpc = await startGrpcServer(options.listen, serverCredentials(tls), log);
    const address = reachableAddress(host, grpc.port);
    cp = await ControlPlane.start(store, {
      replicaName: options.replicaName ?? address,
      address,
      ...(options.leaseTtlMs ? { leaseTtlMs: options.leaseTtlMs } : {}),
      ...(options.tokenSweepMs ? { tokenSweepMs: options.tokenSweepMs } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
      ...(kubernetes ? { kubernetes } : {}),
      ...(options.drain ? { drain: options.drain } : {}),
      ...(options.kubernetesSource ? { kubernetesSource: true } : {}),
      ...(ca ? { certificateSigner: caSigner(ca) } : {}),
    }, log);
    grpc.serve(cp, tls !== undefined);
    if (tls) cp.metrics.servesWith(tls);
    const health = grpc.health;
    const setServing = (serving: boolean): void => {
      for (const s of ['', ...SERVICE_NAMES]) health.setStatus(s, serving ? 'SERVING' : 'NOT_SERVING');
    };
    cp.replica.on('lost', () => setServing(false));
    cp.replica.on('ready', () => setServing(true));
    if (options.bootstrap && tls && ca) {
      const b = parseHostPort(options.bootstrap.listen, '--bootstrap-listen');
      const { tokens, warnings } = parseBootstrapTokenFile(readFileSync(options.bootstrap.tokenFile, 'utf8'), options.bootstrap.tokenFile);
      for (const warning of warnings) log.warn(warning);
      if (tokens.length === 0) log.info({ file: options.bootstrap.tokenFile }, 'the bootstrap token file holds no token: only tokens made with mcctl pki token create serve configs');
      bootstrap = await startBootstrapServer(cp, {
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
      }, b.host.replace(/^\[|\]$/g, ''), b.port, log);
    }
    for (const rule of options.bootstrap?.autoApprove ?? []) {
      // Logged at every start: who may join without an operator is worth seeing in the journal.
      if (rule.pool === 'master') log.warn({ rule: describeRule(rule) }, 'enrollment requests for master matching this rule are approved without an operator: such hosts join the control plane\'s pool');
      else log.info({ rule: describeRule(rule) }, 'enrollment requests matching this rule are approved without an operator');
    }
    const bootstrapPort = bootstrap ? (bootstrap.address() as { port: number }).port : undefined;
    if (metricsListen) {
      cp.metrics.collectProcessMetrics();
      metrics = await startMetricsServer({ ...metricsListen, registry: cp.metrics.registry, log });
    }
    log.info({ grpc: `${host}:${grpc.port}`, tls: tls !== undefined, bootstrapPort, ...(metrics ? { metrics: `http://${metrics.address}/metrics` } : {}), store: store.backend, replica: cp.replica.name, leader: cp.leading, ...(options.etcd ? {} : { dataDir: options.dataDir }) }, 'mcplane-server ready');

    const controlPlane = cp;
    const server = grpc;
    let closing: Promise<void> | undefined;
    return {
      controlPlane,
      grpcPort: grpc.port,
      bootstrapPort,
      ...(metrics ? { metricsPort: metrics.port } : {}),
      close(graceMs = 1500) {
        closing ??= (async () => {
          log.info('shutting down: no new calls, finishing in-flight ones');
          setServing(false);
          bootstrap?.close();
          await metrics?.close();
          // Long-lived calls never end on their own: Watch streams get a status saying why, agent
          // streams end so agents reconnect elsewhere.
          controlPlane.lifecycle.emit('shutdown');
          controlPlane.sessions.closeAll();
          await new Promise<void>((resolve) => {
            const force = setTimeout(() => {
              server.server.forceShutdown();
              resolve();
            }, graceMs);
            server.server.tryShutdown(() => {
              clearTimeout(force);
              resolve();
            });
          });
          bootstrap?.closeAllConnections();
          await controlPlane.stop();
          await store.close();
          log.info('stopped');
        })();
        return closing;
      },
    };
  } catch (err) {
    bootstrap?.close();
    await metrics?.close();
    grpc?.server.forceShutdown();
    await cp?.stop();
    await store.close();
    throw err;
  }
}
