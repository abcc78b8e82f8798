// TLS material for gRPC: every connection is mutual TLS unless plaintext is asked for, and
// plaintext is allowed only on a loopback address.

import { credentials, ServerCredentials, type ChannelCredentials } from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { ConfigurationError } from '../machineconfig/index.ts';

export interface TlsFiles {
  ca: string;
  cert: string;
  key: string;
}

export interface TlsMaterial {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

export function readTlsFiles(files: TlsFiles, what: string): TlsMaterial {
  const read = (path: string, field: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new ConfigurationError(`${what}: cannot read ${field} ${path}: ${(err as Error).message}`);
    }
  };
  return { ca: read(files.ca, 'CA certificate'), cert: read(files.cert, 'certificate'), key: read(files.key, 'private key') };
}

export function serverCredentials(tls: TlsMaterial | undefined): ServerCredentials {
  if (!tls) return ServerCredentials.createInsecure();
  return ServerCredentials.createSsl(tls.ca, [{ cert_chain: tls.cert, private_key: tls.key }], true);
}

export function clientCredentials(tls: TlsMaterial | undefined): ChannelCredentials {
  if (!tls) return credentials.createInsecure();
  return credentials.createSsl(tls.ca, tls.key, tls.cert);
}

/** Hosts that name this machine only; plaintext never leaves them. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1';
  return false;
}

/** Splits "host:port", "[v6]:port"; throws a ConfigurationError naming the flag. */
export function parseHostPort(address: string, flag: string): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(address);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) throw new ConfigurationError(`${flag}: "${address}" is not HOST:PORT (e.g. 127.0.0.1:7443)`);
  return { host: m[1]!, port };
}
