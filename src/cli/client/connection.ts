// How mcctl reaches a server: flags first, then MCPLANE_* environment variables, then the
// config file (~/.config/mcplane/mcctl.yaml or --config). `--pki-dir DIR` is a shortcut for
// the admin credentials `mcctl pki init DIR` wrote.

import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ConfigurationError, YamlSyntaxError } from '../../machineconfig/index.ts';
import { yamlSyntaxLocations } from '../yaml-syntax.ts';
import { CLIENT_CHANNEL_OPTIONS } from '../../runtime/grpc-options.ts';
import { loadMcplaneProto } from '../../runtime/proto.ts';
import { clientCredentials, isLoopbackHost, parseHostPort, readTlsFiles } from '../../runtime/tls.ts';
import type { AgentServiceClient } from '../../runtime/generated/mcplane/v1/AgentService.ts';
import type { ConfigServiceClient } from '../../runtime/generated/mcplane/v1/ConfigService.ts';
import type { IdentityServiceClient } from '../../runtime/generated/mcplane/v1/IdentityService.ts';
import type { StatusServiceClient } from '../../runtime/generated/mcplane/v1/StatusService.ts';

export interface ConnectionFlags {
  server?: string;
  pkiDir?: string;
  ca?: string;
  cert?: string;
  key?: string;
  insecure?: boolean;
  timeout?: string;
  config?: string;
}

export interface Clients {
  server: string;
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
    pkiDir: process.env.MCPLANE_PKI_DIR,
    insecure: process.env.MCPLANE_INSECURE === '1' ? true : undefined,
  };
  const configPath = flags.config ?? process.env.MCCTL_CONFIG ?? DEFAULT_CONFIG_PATH;
  let file: ConnectionFlags = {};
  if (existsSync(configPath)) {
    file = readConfigFile(configPath);
  } else if (flags.config) {
    throw new ConfigurationError(`config file ${flags.config} does not exist`);
  }
  const pick = <K extends keyof ConnectionFlags>(k: K): ConnectionFlags[K] => flags[k] ?? env[k] ?? file[k];
  const server = pick('server');
  if (!server) {
    throw new ConfigurationError(`no server given: use --server HOST:PORT, MCPLANE_SERVER, or "server:" in ${DEFAULT_CONFIG_PATH}`);
  }
  const timeout = Number(pick('timeout') ?? 10);
  if (!(timeout > 0)) throw new ConfigurationError(`--timeout must be a positive number of seconds, got ${pick('timeout')}`);
  const pkiDir = pick('pkiDir');
  return {
    server,
    insecure: pick('insecure') ?? false,
    ca: pick('ca') ?? (pkiDir && join(pkiDir, 'ca.crt')),
    cert: pick('cert') ?? (pkiDir && join(pkiDir, 'admin.crt')),
    key: pick('key') ?? (pkiDir && join(pkiDir, 'admin.key')),
    timeoutMs: timeout * 1000,
  };
}

/** The config file's keys: the flags' names in camelCase. */
const CONFIG_KEYS: Record<string, 'string' | 'boolean' | 'number'> = {
  server: 'string', pkiDir: 'string', ca: 'string', cert: 'string', key: 'string', insecure: 'boolean', timeout: 'number',
};

/** Reads mcctl.yaml strictly: a misspelt key would otherwise be ignored without a word. */
export function readConfigFile(path: string): ConnectionFlags {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigurationError(`config file ${path}: ${(err as Error).message}`);
  }
  const syntax = yamlSyntaxLocations(text, path);
  if (syntax.length) throw new YamlSyntaxError(syntax);
  const value: unknown = parse(text) ?? {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new ConfigurationError(`config file ${path}: expected a mapping of ${Object.keys(CONFIG_KEYS).join(', ')}`);
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    const type = CONFIG_KEYS[key];
    if (!type) {
      const near = Object.keys(CONFIG_KEYS).find((k) => editDistance(k.toLowerCase(), key.toLowerCase()) <= 2);
      throw new ConfigurationError(`config file ${path}: unknown key "${key}"${near ? ` (did you mean "${near}"?)` : ''}; known keys: ${Object.keys(CONFIG_KEYS).join(', ')}`);
    }
    if (v === null || v === undefined) continue;
    if (type === 'number' ? typeof v !== 'number' && !(typeof v === 'string' && Number(v) > 0) : typeof v !== type) {
      throw new ConfigurationError(`config file ${path}: "${key}" must be a ${type}, got ${JSON.stringify(v)}`);
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
  let creds;
  if (c.insecure) {
    if (!isLoopbackHost(host)) throw new ConfigurationError(`--insecure is allowed only for a loopback server, not ${c.server}`);
    creds = clientCredentials(undefined);
  } else {
    if (!c.ca || !c.cert || !c.key) {
      throw new ConfigurationError('credentials are required: --pki-dir DIR (admin.crt from `mcctl pki init`), or --ca, --cert and --key');
    }
    creds = clientCredentials(readTlsFiles({ ca: c.ca, cert: c.cert, key: c.key }, 'mcctl credentials'));
  }
  const { grpc } = loadMcplaneProto();
  const v1 = grpc.mcplane.v1;
  // mcctl backs off on its own (watch reconnects) and says so; the channel's own reconnect
  // backoff (up to 2 minutes by default) would otherwise keep it failing long after the
  // server is back.
  const options = { ...CLIENT_CHANNEL_OPTIONS, 'grpc.initial_reconnect_backoff_ms': 500, 'grpc.max_reconnect_backoff_ms': 5_000 };
  const status = new v1.StatusService(c.server, creds, options);
  const config = new v1.ConfigService(c.server, creds, options);
  const agent = new v1.AgentService(c.server, creds, options);
  const identity = new v1.IdentityService(c.server, creds, options);
  return {
    server: c.server,
    timeoutMs: c.timeoutMs,
    describe: c.insecure ? `${c.server} without TLS (--insecure)` : `${c.server} over TLS (CA ${c.ca}, client certificate ${c.cert})`,
    ...(c.insecure ? {} : { tls: { ca: c.ca!, cert: c.cert! } }),
    status,
    config,
    identity,
    agent,
    close() {
      status.close();
      config.close();
      identity.close();
      agent.close();
    },
  };
}
