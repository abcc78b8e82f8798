// /etc/mcplane/agent.yaml. Every path and endpoint the agent touches comes from here, so tests
// and the demo can point an agent at a temporary root, a private systemd and the rpm-ostree
// stand-in; the defaults are those of a real CoreOS host.

import { readdirSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { parse } from 'yaml';
import { ConfigurationError, isDnsSubdomain, nodeNameProblem } from '../machineconfig/index.ts';
import { parseQuantity } from '../machineconfig/quantity.ts';
import { isLoopbackHost } from '../runtime/tls.ts';
import { CRIO_SOCKET } from './cri-image-client.ts';

export interface AgentConfig {
  /** The control plane's addresses as given, comma-separated (for messages). */
  server: string;
  /**
   * gRPC addresses of mcplane-server replicas, host:port each, in the order to try them: when
   * the stream to one is lost the agent reconnects to the next.
   */
  servers: string[];
  tls: { ca: string; cert: string; key: string } | null;
  /** Plaintext gRPC to a loopback server (development only). */
  insecure: boolean;
  /**
   * How a host without a certificate gets one: with the single-use token a bootstrap host was
   * given (POST url, the server's /enroll), or by asking to join a pool and waiting for an
   * operator or an auto-approve rule (POST url, the server's /enrollment-requests, then polling).
   */
  enrollment: { url: string; tokenFile: string } | { url: string; pool: string; pollSeconds: number } | null;
  nodeName: string;
  labels: Record<string, string>;
  paths: {
    /** Managed files are written under this root ("/" on a host). */
    root: string;
    unitDir: string;
    stateDir: string;
    sshKeysDir: string;
    bootIdFile: string;
    /** The booted kernel's command line, which validation checks kernel arguments against. */
    kernelCmdlineFile: string;
  };
  /** "system", "session", or a D-Bus address such as unix:path=/run/user/0/bus. */
  systemdBus: string;
  rpmOstree: string;
  reboot: { method: 'logind' } | { method: 'command'; command: string[] };
  /**
   * intervalSeconds: the full comparison's period. The reconcile* bounds are driftPolicy
   * Reconcile's per file (drift-reconciler.ts): the first rewrite is at once, each next one waits
   * twice as long as the one before (from reconcileBackoffSeconds), and a file rewritten
   * reconcileMaxRewrites times within reconcileWindowSeconds is given up on (the node Degraded).
   */
  drift: { intervalSeconds: number; reconcileMaxRewrites: number; reconcileBackoffSeconds: number; reconcileWindowSeconds: number };
  heartbeatSeconds: number;
  logLevel: string;
  /** How long to wait on one systemd job. */
  jobTimeoutSeconds: number;
  /** How long any one D-Bus call may wait for its reply. */
  dbusTimeoutSeconds: number;
  /** How long one rpm-ostree command may run. */
  rpmOstreeTimeoutSeconds: number;
  /**
   * How long one step of an update (apply, actions, validate, ...) may take before the node is
   * Degraded naming the step; past it the watchdog is no longer fed.
   */
  stepTimeoutSeconds: number;
  /** Prometheus /metrics: listen "" turns it off; a non-loopback address needs allowNonLoopback. */
  metrics: { listen: string; allowNonLoopback: boolean };
  /** The container runtime's CRI socket the pinned image sets are pulled through (CRI-O's by default). */
  criSocket: string;
  /**
   * The pinned image sets' room check: bytes the image filesystem must keep free after the pulls
   * (MCO's minStorageAvailableBytes), the size each missing image is expected to take before it
   * is pulled (counted twice, compressed and unpacked, as MCO counts), and how long a set that
   * failed waits before it is tried again.
   */
  pinnedImages: { minFreeBytes: number; imageSizeBytes: number; retrySeconds: number };
  /** Downloads ahead of the drain (os-staging.ts): the disk check and the retry backoff. */
  staging: StagingConfig;
}

export interface StagingConfig {
  /** The file system rpm-ostree downloads into (the ostree repo's: /sysroot on CoreOS). */
  fileSystem: string;
  /** Bytes that must stay free on it after a download (the check refuses below that). */
  minFreeDisk: number;
  /** Download size estimates in bytes by image (as in osImageURL), for when the tool cannot tell. */
  imageSizes: Record<string, number>;
  /** The estimate for an image not in imageSizes, and for each layered package. */
  defaultImageSize: number;
  packageSize: number;
  /** The first retry of a failed download, doubled each time up to maxRetrySeconds. */
  retrySeconds: number;
  maxRetrySeconds: number;
}

/** The agent's /metrics port (127.0.0.1 only by default); ntp_exporter has 9559, hence not that. */
export const DEFAULT_METRICS_LISTEN = '127.0.0.1:9624';

/** The keys agent.yaml accepts (also listed in docs/reference/flags.md, generated from these). */
export const PATH_KEYS = ['root', 'unitDir', 'stateDir', 'sshKeysDir', 'bootIdFile', 'kernelCmdlineFile'];
const ENROLLMENT_KEYS = ['url', 'tokenFile', 'pool', 'pollSeconds'];
export const KNOWN_KEYS = ['server', 'servers', 'tls', 'insecure', 'enrollment', 'nodeName', 'labels', 'paths', 'systemdBus', 'rpmOstree', 'reboot', 'drift', 'heartbeatSeconds', 'logLevel', 'jobTimeoutSeconds', 'dbusTimeoutSeconds', 'rpmOstreeTimeoutSeconds', 'stepTimeoutSeconds', 'metrics', 'criSocket', 'pinnedImages', 'staging'];

export const DEFAULT_CONFIG_PATH = '/etc/mcplane/agent.yaml';

/**
 * Reads agent.yaml and then every agent.yaml.d/*.yaml beside it in name order, each merged over
 * the last (maps merge, other values replace), so an image or a test adds settings without
 * editing the file the bootstrap endpoint wrote. With `root` other than "/", the config is read
 * from under it and every host path in it resolves under it too (like rpm --root).
 */
export function loadAgentConfig(path: string | undefined, root = '/'): AgentConfig {
  const file = path ?? join(root, DEFAULT_CONFIG_PATH);
  let merged: Record<string, unknown> = readYaml(file, true) as Record<string, unknown>;
  let dropins: string[] = [];
  try {
    dropins = readdirSync(`${file}.d`).filter((f) => f.endsWith('.yaml')).sort();
  } catch { /* no drop-ins */ }
  for (const name of dropins) merged = deepMerge(merged, readYaml(join(`${file}.d`, name), false) as Record<string, unknown>);
  const config = parseAgentConfig(merged, file, root);
  return config;
}

function readYaml(path: string, required: boolean): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (!required) return {};
    throw new ConfigurationError(`cannot read agent config ${path}: ${(err as Error).message}`);
  }
  try {
    return parse(text) ?? {};
  } catch (err) {
    throw new ConfigurationError(`agent config ${path}: not valid YAML: ${(err as Error).message}`);
  }
}

function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over ?? {})) {
    const b = out[k];
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && b && typeof b === 'object' && !Array.isArray(b)
      ? deepMerge(b as Record<string, unknown>, v as Record<string, unknown>)
      : v;
  }
  return out;
}

export function parseAgentConfig(raw: unknown, source = 'agent config', hostRoot = '/'): AgentConfig {
  const fail = (field: string, rule: string): never => {
    throw new ConfigurationError(`${source}: ${field}: ${rule}`);
  };
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) fail('(top)', 'must be a mapping');
  const r = raw as Record<string, any>;
  for (const key of Object.keys(r)) if (!KNOWN_KEYS.includes(key)) fail(key, `unknown field (expected one of: ${KNOWN_KEYS.join(', ')})`);
  const servers = serversOf(r.server, r.servers, fail);
  /**
   * A host path the config names: under --root DIR it is DIR + path, like rpm --root (the config
   * describes the host, and DIR is where that host's tree is). Programs to run (rpmOstree,
   * reboot.command) are this machine's and do not move.
   */
  const host = (p: string): string => (p && isAbsolute(p) && hostRoot !== '/' ? (p === '/' ? hostRoot : join(hostRoot, p)) : p);
  const rawRoot = r.paths?.root ?? '/';
  if (typeof rawRoot !== 'string' || !rawRoot.startsWith('/')) fail('paths.root', 'must be an absolute path');
  const root = host(rawRoot);
  const path = (v: unknown, field: string): string | undefined => {
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string' || !isAbsolute(v)) fail(field, 'must be an absolute path');
    return host(v as string);
  };
  const under = (p: string): string => join(root, p);
  const str = (v: unknown, field: string, dflt: string): string => {
    if (v === undefined || v === null) return dflt;
    if (typeof v !== 'string' || !v) fail(field, 'must be a non-empty string');
    return v as string;
  };
  const num = (v: unknown, field: string, dflt: number): number => {
    if (v === undefined || v === null) return dflt;
    if (typeof v !== 'number' || !(v > 0)) fail(field, 'must be a positive number');
    return v as number;
  };
  let tls: AgentConfig['tls'] = null;
  if (r.tls) tls = { ca: host(str(r.tls.ca, 'tls.ca', '')), cert: host(str(r.tls.cert, 'tls.cert', '')), key: host(str(r.tls.key, 'tls.key', '')) };
  const insecure = r.insecure === true;
  if (!tls && !insecure) fail('tls', 'required (ca, cert, key); plaintext needs insecure: true and a loopback server');
  if (tls && (!tls.ca || !tls.cert || !tls.key)) fail('tls', 'ca, cert and key are all required');
  let enrollment: AgentConfig['enrollment'] = null;
  if (r.enrollment) {
    for (const key of Object.keys(r.enrollment)) if (!ENROLLMENT_KEYS.includes(key)) fail(`enrollment.${key}`, `unknown field (expected one of: ${ENROLLMENT_KEYS.join(', ')})`);
    const url = str(r.enrollment.url, 'enrollment.url', '');
    if (!/^https:\/\/[^/]/.test(url)) fail('enrollment.url', 'required: the bootstrap endpoint, https://HOST:22623/enroll (with tokenFile) or https://HOST:22623/enrollment-requests (with pool)');
    const tokenFile = str(r.enrollment.tokenFile, 'enrollment.tokenFile', '');
    const pool = str(r.enrollment.pool, 'enrollment.pool', '');
    if (Boolean(tokenFile) === Boolean(pool)) fail('enrollment', 'give tokenFile (the single-use token a bootstrap host gets) or pool (ask to join it and wait for approval), one of them');
    if (tokenFile && r.enrollment.pollSeconds !== undefined) fail('enrollment.pollSeconds', 'only with pool: a token enrolls at once');
    if (pool && !isDnsSubdomain(pool)) fail('enrollment.pool', `"${pool}" is not a pool name (a DNS subdomain: lowercase letters, digits, "-", ".")`);
    const pollSeconds = num(r.enrollment.pollSeconds, 'enrollment.pollSeconds', 10);
    if (pollSeconds < 0.1 || pollSeconds > 300) fail('enrollment.pollSeconds', 'must be between 0.1 and 300');
    enrollment = tokenFile ? { url, tokenFile: host(tokenFile) } : { url, pool, pollSeconds };
  }
  for (const key of Object.keys(r.paths ?? {})) if (!PATH_KEYS.includes(key)) fail(`paths.${key}`, `unknown field (expected one of: ${PATH_KEYS.join(', ')})`);
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.labels ?? {})) {
    if (v !== null && typeof v !== 'string') fail(`labels.${k}`, 'label values must be strings');
    labels[k] = (v as string | null) ?? '';
  }
  let reboot: AgentConfig['reboot'] = { method: 'logind' };
  if (r.reboot?.method === 'command') {
    if (!Array.isArray(r.reboot.command) || r.reboot.command.length === 0 || !r.reboot.command.every((x: unknown) => typeof x === 'string')) {
      fail('reboot.command', 'a non-empty list of strings (program and arguments)');
    }
    reboot = { method: 'command', command: r.reboot.command };
  } else if (r.reboot && r.reboot.method !== 'logind') {
    fail('reboot.method', 'must be logind or command');
  }
  const nodeName = str(r.nodeName, 'nodeName', hostname().toLowerCase());
  const nameProblem = nodeNameProblem(nodeName);
  if (nameProblem) fail('nodeName', nameProblem);
  return {
    server: servers.join(','),
    servers,
    tls,
    insecure,
    enrollment,
    nodeName,
    labels,
    paths: {
      root,
      unitDir: path(r.paths?.unitDir, 'paths.unitDir') ?? under('/etc/systemd/system'),
      stateDir: path(r.paths?.stateDir, 'paths.stateDir') ?? under('/var/lib/mcplane'),
      sshKeysDir: path(r.paths?.sshKeysDir, 'paths.sshKeysDir') ?? under('/home/core/.ssh/authorized_keys.d'),
      // The running kernel's, unless the config names another file (then under --root too).
      bootIdFile: path(r.paths?.bootIdFile, 'paths.bootIdFile') ?? '/proc/sys/kernel/random/boot_id',
      kernelCmdlineFile: path(r.paths?.kernelCmdlineFile, 'paths.kernelCmdlineFile') ?? '/proc/cmdline',
    },
    systemdBus: str(r.systemdBus, 'systemdBus', 'system'),
    rpmOstree: str(r.rpmOstree, 'rpmOstree', 'rpm-ostree'),
    reboot,
    drift: {
      intervalSeconds: num(r.drift?.intervalSeconds, 'drift.intervalSeconds', 60),
      reconcileMaxRewrites: Math.ceil(num(r.drift?.reconcileMaxRewrites, 'drift.reconcileMaxRewrites', 5)),
      reconcileBackoffSeconds: num(r.drift?.reconcileBackoffSeconds, 'drift.reconcileBackoffSeconds', 2),
      reconcileWindowSeconds: num(r.drift?.reconcileWindowSeconds, 'drift.reconcileWindowSeconds', 600),
    },
    heartbeatSeconds: num(r.heartbeatSeconds, 'heartbeatSeconds', 30),
    logLevel: logLevelOf(r.logLevel, fail),
    jobTimeoutSeconds: num(r.jobTimeoutSeconds, 'jobTimeoutSeconds', 90),
    dbusTimeoutSeconds: num(r.dbusTimeoutSeconds, 'dbusTimeoutSeconds', 25),
    rpmOstreeTimeoutSeconds: num(r.rpmOstreeTimeoutSeconds, 'rpmOstreeTimeoutSeconds', 1800),
    stepTimeoutSeconds: num(r.stepTimeoutSeconds, 'stepTimeoutSeconds', 3600),
    metrics: metricsOf(r.metrics, fail),
    // The runtime runs on this machine: its socket is not moved under --root.
    criSocket: criSocketOf(r.criSocket, fail),
    pinnedImages: pinnedImagesOf(r.pinnedImages, fail),
    staging: stagingOf(r.staging, fail, (p) => path(p, 'staging.fileSystem') ?? under('/sysroot')),
  };
}

const STAGING_KEYS = ['fileSystem', 'minFreeDisk', 'imageSizes', 'defaultImageSize', 'packageSize', 'retrySeconds', 'maxRetrySeconds'];
/** ostree needs room for a deployment's checkout and /boot's copies beyond the download: 1 GiB kept free by default. */
export const DEFAULT_MIN_FREE_DISK = 1024 ** 3;

function stagingOf(v: unknown, fail: (field: string, rule: string) => never, fileSystem: (p: unknown) => string): StagingConfig {
  const m = (v ?? {}) as Record<string, unknown>;
  if (typeof m !== 'object' || Array.isArray(m)) fail('staging', 'must be a mapping: {minFreeDisk: 1Gi, imageSizes: {IMAGE: 2Gi}}');
  for (const key of Object.keys(m)) if (!STAGING_KEYS.includes(key)) fail(`staging.${key}`, `unknown field (expected one of: ${STAGING_KEYS.join(', ')})`);
  const bytes = (raw: unknown, field: string, dflt: number): number => {
    if (raw === undefined || raw === null) return dflt;
    const q = typeof raw === 'string' || typeof raw === 'number' ? parseQuantity(raw) : { error: 'not a string or number' };
    if ('error' in q || q.value < 0) fail(field, `must be a size such as 1Gi, 500Mi or 2000000000 (bytes), got ${JSON.stringify(raw)}${'error' in q ? `: ${q.error}` : ''}`);
    return (q as { value: number }).value;
  };
  const seconds = (raw: unknown, field: string, dflt: number): number => {
    if (raw === undefined || raw === null) return dflt;
    if (typeof raw !== 'number' || !(raw > 0)) fail(field, 'must be a positive number of seconds');
    return raw as number;
  };
  const imageSizes: Record<string, number> = {};
  if (m.imageSizes !== undefined && m.imageSizes !== null) {
    if (typeof m.imageSizes !== 'object' || Array.isArray(m.imageSizes)) fail('staging.imageSizes', 'must map images (as in osImageURL) to sizes');
    for (const [image, size] of Object.entries(m.imageSizes as Record<string, unknown>)) imageSizes[image] = bytes(size, `staging.imageSizes.${image}`, 0);
  }
  return {
    fileSystem: fileSystem(m.fileSystem),
    minFreeDisk: bytes(m.minFreeDisk, 'staging.minFreeDisk', DEFAULT_MIN_FREE_DISK),
    imageSizes,
    defaultImageSize: bytes(m.defaultImageSize, 'staging.defaultImageSize', 2 * 1024 ** 3),
    packageSize: bytes(m.packageSize, 'staging.packageSize', 100 * 1024 ** 2),
    retrySeconds: seconds(m.retrySeconds, 'staging.retrySeconds', 10),
    maxRetrySeconds: seconds(m.maxRetrySeconds, 'staging.maxRetrySeconds', 600),
  };
}

function criSocketOf(v: unknown, fail: (field: string, rule: string) => never): string {
  if (v === undefined || v === null) return CRIO_SOCKET;
  if (typeof v !== 'string' || !isAbsolute(v)) fail('criSocket', `must be the absolute path of the runtime's CRI socket (default ${CRIO_SOCKET})`);
  return v as string;
}

const GiB = 1024 ** 3;
const PINNED_IMAGES_KEYS = ['minFreeBytes', 'imageSizeBytes', 'retrySeconds'];

function pinnedImagesOf(v: unknown, fail: (field: string, rule: string) => never): AgentConfig['pinnedImages'] {
  const out = { minFreeBytes: 10 * GiB, imageSizeBytes: GiB, retrySeconds: 300 };
  if (v === undefined || v === null) return out;
  if (typeof v !== 'object' || Array.isArray(v)) fail('pinnedImages', `must be a mapping of ${PINNED_IMAGES_KEYS.join(', ')}`);
  const m = v as Record<string, unknown>;
  for (const key of Object.keys(m)) if (!PINNED_IMAGES_KEYS.includes(key)) fail(`pinnedImages.${key}`, `unknown field (expected one of: ${PINNED_IMAGES_KEYS.join(', ')})`);
  const whole = (key: 'minFreeBytes' | 'imageSizeBytes' | 'retrySeconds', min: number): void => {
    const n = m[key];
    if (n === undefined || n === null) return;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min) fail(`pinnedImages.${key}`, `must be a whole number of at least ${min} (got ${JSON.stringify(n)})`);
    out[key] = n as number;
  };
  whole('minFreeBytes', 0);
  whole('imageSizeBytes', 1);
  whole('retrySeconds', 1);
  return out;
}

function metricsOf(v: unknown, fail: (field: string, rule: string) => never): AgentConfig['metrics'] {
  if (v === undefined || v === null) return { listen: DEFAULT_METRICS_LISTEN, allowNonLoopback: false };
  if (typeof v !== 'object' || Array.isArray(v)) fail('metrics', 'must be a mapping: {listen: "127.0.0.1:9624"} ("" turns /metrics off)');
  const m = v as Record<string, unknown>;
  for (const key of Object.keys(m)) if (key !== 'listen' && key !== 'allowNonLoopback') fail(`metrics.${key}`, 'unknown field (expected one of: listen, allowNonLoopback)');
  if (m.listen !== undefined && typeof m.listen !== 'string') fail('metrics.listen', 'must be HOST:PORT, or "" to turn /metrics off');
  if (m.allowNonLoopback !== undefined && typeof m.allowNonLoopback !== 'boolean') fail('metrics.allowNonLoopback', 'must be true or false');
  const listen = (m.listen as string | undefined) ?? DEFAULT_METRICS_LISTEN;
  if (listen !== '' && !/^(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d{1,5}$/.test(listen)) fail('metrics.listen', `${JSON.stringify(listen)} is not HOST:PORT (e.g. ${DEFAULT_METRICS_LISTEN}); "" turns /metrics off`);
  const allowNonLoopback = m.allowNonLoopback === true;
  if (listen !== '' && !allowNonLoopback && !isLoopbackHost(listen.slice(0, listen.lastIndexOf(':')))) {
    fail('metrics.listen', `${listen}: /metrics is plain HTTP without authentication and listens only on a loopback address (127.0.0.1, ::1, localhost) unless metrics.allowNonLoopback: true is also set`);
  }
  return { listen, allowNonLoopback };
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function logLevelOf(v: unknown, fail: (field: string, rule: string) => never): string {
  if (v === undefined || v === null) return 'info';
  if (typeof v !== 'string' || !LOG_LEVELS.includes(v)) fail('logLevel', `must be one of ${LOG_LEVELS.join(', ')} (got ${JSON.stringify(v)})`);
  return v as string;
}

const HOST_PORT = /^[^\s,]+:\d+$/;

/** `server: a:1`, `server: "a:1,b:2"` or `servers: [a:1, b:2]`: one list, each HOST:PORT. */
function serversOf(server: unknown, servers: unknown, fail: (field: string, rule: string) => never): string[] {
  const rule = 'required, HOST:PORT of mcplane-server (several: server: "a:7443,b:7443" or servers: [a:7443, b:7443])';
  if (server !== undefined && servers !== undefined) fail('servers', 'give server or servers, not both');
  if (servers !== undefined) {
    if (!Array.isArray(servers) || servers.length === 0) fail('servers', rule);
    (servers as unknown[]).forEach((s, i) => { if (typeof s !== 'string' || !HOST_PORT.test(s)) fail(`servers[${i}]`, `${JSON.stringify(s)} is not HOST:PORT`); });
    return [...new Set(servers as string[])];
  }
  if (typeof server !== 'string' || !server.trim()) fail('server', rule);
  const list = (server as string).split(',').map((s) => s.trim());
  list.forEach((s, i) => { if (!HOST_PORT.test(s)) fail('server', list.length === 1 ? rule : `entry ${i + 1} ${JSON.stringify(s)} is not HOST:PORT`); });
  return [...new Set(list)];
}
