// How mcctl reaches a server: flags first, then MCPLANE_* environment variables, then the
// config file (~/.config/mcplane/mcctl.yaml or --config). `--pki-dir DIR` is a shortcut for
// the admin credentials `mcctl pki init DIR` wrote.

import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ConfigurationError } from '../../machineconfig/index.ts';
import { CLIENT_CHANNEL_OPTIONS } from '../../runtime/grpc-options.ts';
import { loadMcplaneProto } from '../../runtime/proto.ts';
import { clientCredentials, isLoopbackHost, parseHostPort, readTlsFiles } from '../../runtime/tls.ts';
import type { AgentServiceClient } from '../../runtime/generated/mcplane/v1/AgentService.ts';
import type { ConfigServiceClient } from '../../runtime/generated/mcplane/v1/ConfigService.ts';
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
  describe?: string;
  status: StatusServiceClient;
  config: ConfigServiceClient;
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
    try {
      file = (parse(readFileSync(configPath, 'utf8')) ?? {}) as ConnectionFlags;
    } catch (err) {
      throw new ConfigurationError(`config file ${configPath}: ${(err as Error).message}`);
    }
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
  const status = new v1.StatusService(c.server, creds, CLIENT_CHANNEL_OPTIONS);
  const config = new v1.ConfigService(c.server, creds, CLIENT_CHANNEL_OPTIONS);
  const agent = new v1.AgentService(c.server, creds, CLIENT_CHANNEL_OPTIONS);
  return {
    server: c.server,
    timeoutMs: c.timeoutMs,
    status,
    config,
    agent,
    close() {
      status.close();
      config.close();
      agent.close();
    },
  };
}
