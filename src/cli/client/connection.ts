// How mcctl reaches a server: flags first, then MCPLANE_* environment variables, then the
// config file (~/.config/mcplane/mcctl.yaml or --config). `--pki-dir DIR` is a shortcut for
// the admin credentials `mcctl pki init DIR` wrote.

import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ConfigurationError, YamlSyntaxError } from '../../machineconfig/errors.ts';
import { yamlSyntaxLocations } from '../yaml-syntax.ts';
import { CLIENT_CHANNEL_OPTIONS } from '../../runtime/grpc-options.ts';
import { loadClientContract } from '../../runtime/client-contract.ts';
import { clientCredentials, isLoopbackHost, parseHostPort, readTlsFiles } from '../../runtime/tls.ts';
import type { AgentServiceClient } from '../../runtime/generated/mcplane/v1/AgentService.ts';
import type { ConfigServiceClient } from '../../runtime/generated/mcplane/v1/ConfigService.ts';
import type { IdentityServiceClient } from '../../runtime/generated/mcplane/v1/IdentityService.ts';
import type { StatusServiceClient } from '../../runtime/generated/mcplane/v1/StatusService.ts';

export interface ConnectionFlags {
  server?: string;
  /** Where StatusService calls go, when not to `server`: a server's --status-listen. */
  statusServer?: string;
  /** StatusService on `server` whatever statusServer says (wait, rollout status: see main.ts). */
  readsFromServer?: boolean;
  pkiDir?: string;
  ca?: string;
  cert?: string;
  key?: string;
  insecure?: boolean;
  /** The limit on each call, in seconds or as a duration (5s, 1m): kubectl's --request-timeout. */
  requestTimeout?: string;
  /** requestTimeout's old name, still taken from callers in code (bench and tests). */
  timeout?: string;
  config?: string;
  /** Which of the config file's contexts to use (kubectl's --context). */
  context?: string;
}

export interface Clients {
  server: string;
  /** Where reads go: statusServer, else server. */
  statusServer: string;
  timeoutMs: number;
  /** What was tried, for connection failures: address, TLS or not, which files. */
  describe: string;
  tls?: { ca: string; cert: string };
  status: StatusServiceClient;
  config: ConfigServiceClient;
  identity: IdentityServiceClient;
  agent: AgentServiceClient;
  close(): void;
}

export const DEFAULT_CONFIG_PATH = join(homedir(), '.config', 'mcplane', 'mcctl.yaml');

export function resolveConnection(flags: ConnectionFlags): Required<Pick<ConnectionFlags, 'server'>> & ConnectionFlags & { timeoutMs: number } {
  const env: ConnectionFlags = {
    server: process.env.MCPLANE_SERVER,
    statusServer: process.env.MCPLANE_STATUS_SERVER,
    pkiDir: process.env.MCPLANE_PKI_DIR,
    insecure: process.env.MCPLANE_INSECURE === '1' ? true : undefined,
  };
  const configPath = configPathOf(flags);
  let file: ClientConfig = { defaults: {}, contexts: [] };
  if (existsSync(configPath)) {
    file = readConfigFile(configPath);
  } else if (flags.config) {
    throw new ConfigurationError(`config file ${flags.config} does not exist`);
  }
  const contextName = flags.context ?? process.env.MCPLANE_CONTEXT ?? file.currentContext;
  let context: ConnectionFlags = {};
  if (contextName !== undefined) {
    const found = file.contexts.find((c) => c.name === contextName);
    if (!found) {
      throw new ConfigurationError(`context "${contextName}" is not in ${configPath}${file.contexts.length ? ` (contexts: ${file.contexts.map((c) => c.name).join(', ')})` : ' (it has no contexts)'}; list them with mcctl config get-contexts`);
    }
    context = found;
  }
  // A context names a server and its credentials; the file's own keys are defaults for all.
  const levels = [flags, env, context, file.defaults];
  const pick = <K extends keyof ConnectionFlags>(k: K): ConnectionFlags[K] => flags[k] ?? env[k] ?? context[k] ?? file.defaults[k];
  const server = pick('server');
  // The status server goes with its server: one from a lower level than the one that named the
  // server (the file's defaults under a --server flag, another context's) would send reads to
  // another control plane than writes.
  const serverLevel = levels.findIndex((l) => l.server !== undefined);
  const statusServer = flags.readsFromServer ? undefined : levels.slice(0, serverLevel + 1).find((l) => l.statusServer !== undefined)?.statusServer;
  if (!server) {
    throw new ConfigurationError(`no server given: use --server HOST:PORT, MCPLANE_SERVER, or "server:" in ${DEFAULT_CONFIG_PATH}`);
  }
  const raw = pick('requestTimeout') ?? flags.timeout ?? '10';
  const timeoutMs = parseRequestTimeout(raw);
  const pkiDir = pick('pkiDir');
  return {
    server,
    ...(statusServer ? { statusServer } : {}),
    insecure: pick('insecure') ?? false,
    ca: pick('ca') ?? (pkiDir && join(pkiDir, 'ca.crt')),
    cert: pick('cert') ?? (pkiDir && join(pkiDir, 'admin.crt')),
    key: pick('key') ?? (pkiDir && join(pkiDir, 'admin.key')),
    timeoutMs,
  };
}

/** --request-timeout: seconds (10) or a duration (10s, 1m, 500ms), as kubectl takes it; more than 0. */
export function parseRequestTimeout(text: string): number {
  let ms = NaN;
  if (/^\d+(\.\d+)?$/.test(text)) ms = Number(text) * 1000;
  else if (/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(text)) {
    const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
    ms = 0;
    for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) ms += Number(m[1]) * units[m[2]!]!;
  }
  if (!(ms > 0)) throw new ConfigurationError(`--request-timeout ${text}: give a positive number of seconds or a duration (e.g. 10, 30s, 1m)`);
  return ms;
}

export function configPathOf(flags: Pick<ConnectionFlags, 'config'>): string {
  return flags.config ?? process.env.MCCTL_CONFIG ?? DEFAULT_CONFIG_PATH;
}

/** A named server and its credentials in the config file, as a kubeconfig context. */
export interface Context extends ConnectionFlags {
  name: string;
}

export interface ClientConfig {
  /** The file's own connection keys: defaults under every context (the one-server layout). */
  defaults: ConnectionFlags;
  currentContext?: string;
  contexts: Context[];
}

/** The config file's connection keys: the flags' names in camelCase. */
export const CONNECTION_KEYS: Record<string, 'string' | 'boolean' | 'number'> = {
  server: 'string', statusServer: 'string', pkiDir: 'string', ca: 'string', cert: 'string', key: 'string', insecure: 'boolean', requestTimeout: 'number',
};
/** Keys of the file itself, besides the connection keys. `timeout` is requestTimeout's old name. */
export const FILE_KEYS = [...Object.keys(CONNECTION_KEYS), 'timeout', 'currentContext', 'contexts'];
export const CONTEXT_KEYS = ['name', ...Object.keys(CONNECTION_KEYS)];

/**
 * Reads mcctl.yaml strictly: a misspelt key would otherwise be ignored without a word. The file
 * holds either one server's keys, or several servers as contexts (kubeconfig's idea, flatter):
 *
 *   currentContext: lab
 *   contexts:
 *     - name: lab
 *       server: lab.example:7443
 *       pkiDir: ~/.config/mcplane/lab
 */
export function readConfigFile(path: string): ClientConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigurationError(`config file ${path}: ${(err as Error).message}`);
  }
  const syntax = yamlSyntaxLocations(text, path);
  if (syntax.length) throw new YamlSyntaxError(syntax);
  const value: unknown = parse(text) ?? {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new ConfigurationError(`config file ${path}: expected a mapping of ${FILE_KEYS.join(', ')}`);
  const top = value as Record<string, unknown>;
  const defaults = connectionKeys(top, FILE_KEYS, path, '');
  if (top.timeout !== undefined && top.timeout !== null && defaults.requestTimeout === undefined) {
    defaults.requestTimeout = connectionKeys({ requestTimeout: top.timeout }, ['requestTimeout'], path, '').requestTimeout;
  }
  if (top.currentContext !== undefined && top.currentContext !== null && typeof top.currentContext !== 'string') {
    throw new ConfigurationError(`config file ${path}: "currentContext" must be a string, got ${JSON.stringify(top.currentContext)}`);
  }
  const contexts: Context[] = [];
  if (top.contexts !== undefined && top.contexts !== null) {
    if (!Array.isArray(top.contexts)) throw new ConfigurationError(`config file ${path}: "contexts" must be a list of {name, server, pkiDir, ...}`);
    top.contexts.forEach((entry: unknown, i) => {
      const where = `contexts[${i}]`;
      if (!entry || typeof entry !== 'object' || Array.isArray(entry)) throw new ConfigurationError(`config file ${path}: ${where} must be a mapping of ${CONTEXT_KEYS.join(', ')}`);
      const e = entry as Record<string, unknown>;
      if (typeof e.name !== 'string' || !e.name) throw new ConfigurationError(`config file ${path}: ${where}.name must be a non-empty string`);
      if (contexts.some((c) => c.name === e.name)) throw new ConfigurationError(`config file ${path}: ${where}: a second context named "${e.name}"`);
      contexts.push({ name: e.name, ...connectionKeys(e, CONTEXT_KEYS, path, `${where}.`) });
    });
  }
  return { defaults, ...(typeof top.currentContext === 'string' ? { currentContext: top.currentContext } : {}), contexts };
}

function connectionKeys(value: Record<string, unknown>, known: string[], path: string, where: string): ConnectionFlags {
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (!known.includes(key)) {
      const near = known.find((k) => editDistance(k.toLowerCase(), key.toLowerCase()) <= 2);
      throw new ConfigurationError(`config file ${path}: unknown key "${where}${key}"${near ? ` (did you mean "${near}"?)` : ''}; known keys: ${known.join(', ')}`);
    }
    const type = CONNECTION_KEYS[key];
    if (!type || v === null || v === undefined) continue;
    // requestTimeout: seconds, or a duration string checked where it is used (parseRequestTimeout).
    if (type === 'number' ? typeof v !== 'number' && typeof v !== 'string' : typeof v !== type) {
      throw new ConfigurationError(`config file ${path}: "${where}${key}" must be a ${type}, got ${JSON.stringify(v)}`);
    }
    out[key] = type === 'number' ? String(v) : v;
  }
  return out as ConnectionFlags;
}

function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
  }
  return d[a.length]![b.length]!;
}

export function connect(flags: ConnectionFlags): Clients {
  const c = resolveConnection(flags);
  const { host } = parseHostPort(c.server, '--server');
  const statusServer = c.statusServer ?? c.server;
  const statusHost = parseHostPort(statusServer, '--status-server').host;
  let creds;
  if (c.insecure) {
    if (!isLoopbackHost(host)) throw new ConfigurationError(`--insecure is allowed only for a loopback server, not ${c.server}`);
    if (!isLoopbackHost(statusHost)) throw new ConfigurationError(`--insecure is allowed only for a loopback server, not --status-server ${statusServer}`);
    creds = clientCredentials(undefined);
  } else {
    if (!c.ca || !c.cert || !c.key) {
      throw new ConfigurationError('credentials are required: --pki-dir DIR (admin.crt from `mcctl pki init`), or --ca, --cert and --key');
    }
    creds = clientCredentials(readTlsFiles({ ca: c.ca, cert: c.cert, key: c.key }, 'mcctl credentials'));
  }
  const v1 = loadClientContract();
  // mcctl backs off on its own (watch reconnects) and says so; the channel's own reconnect
  // backoff (up to 2 minutes by default) would otherwise keep it failing long after the
  // server is back.
  const options = { ...CLIENT_CHANNEL_OPTIONS, 'grpc.initial_reconnect_backoff_ms': 500, 'grpc.max_reconnect_backoff_ms': 5_000 };
  // Each service's client is made when first used: `get pools` needs one, and every client is
  // its own channel to set up (they share the connection).
  const made = new Map<string, { close(): void }>();
  let closed = false;
  const lazy = <T extends { close(): void }>(name: string, make: () => T): T => {
    let client = made.get(name) as T | undefined;
    if (!client) {
      client = make();
      made.set(name, client);
      // Used after close (a late timer): closed at once, so it fails as a closed client does
      // rather than keep the process alive.
      if (closed) client.close();
    }
    return client;
  };
  return {
    server: c.server,
    statusServer,
    timeoutMs: c.timeoutMs,
    describe: `${c.server}${c.statusServer ? ` (reads: ${c.statusServer})` : ''} ${c.insecure ? 'without TLS (--insecure)' : `over TLS (CA ${c.ca}, client certificate ${c.cert})`}`,
    ...(c.insecure ? {} : { tls: { ca: c.ca!, cert: c.cert! } }),
    get status() { return lazy('status', () => new v1.StatusService(statusServer, creds, options)); },
    get config() { return lazy('config', () => new v1.ConfigService(c.server, creds, options)); },
    get identity() { return lazy('identity', () => new v1.IdentityService(c.server, creds, options)); },
    get agent() { return lazy('agent', () => new v1.AgentService(c.server, creds, options)); },
    close() {
      closed = true;
      for (const client of made.values()) client.close();
    },
  };
}
