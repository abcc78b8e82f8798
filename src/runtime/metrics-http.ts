// The /metrics endpoint the server and the agent share: plain HTTP, as Prometheus scrapes it.
// Plain HTTP carries no authentication, so it listens on a loopback address unless the operator
// opts in to another one explicitly (the same rule as plaintext gRPC): what the metrics reveal
// (pool names, node names, reasons) is not for anyone on the network by accident.
//
// Loopback alone does not keep a browser out: a page on evil.example whose name then resolves
// to 127.0.0.1 (DNS rebinding) reads the endpoint as its own origin. Its requests carry
// `Host: evil.example`, so only names the endpoint expects are answered (see acceptsMetricsHost).

import { createServer, type Server } from 'node:http';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import { ConfigurationError } from '../machineconfig/index.ts';
import type { Logger } from './logger.ts';
import { isLoopbackHost, parseHostPort } from './tls.ts';

export interface MetricsListenOptions {
  /** HOST:PORT; port 0 picks a free one. */
  listen: string;
  /** Allow an address other than loopback (the operator's explicit opt-in). */
  allowNonLoopback?: boolean;
  /** How the setting is named to the operator, for errors: "--metrics-listen", "metrics.listen". */
  setting: string;
  /** How the opt-in is named to the operator. */
  optIn: string;
}

/** Checks the address without binding it, so a bad setting fails before anything starts. */
export function checkMetricsListen(o: MetricsListenOptions): { host: string; port: number } {
  const { host, port } = parseHostPort(o.listen, o.setting);
  if (!isLoopbackHost(host) && !o.allowNonLoopback) {
    throw new ConfigurationError(`${o.setting} ${o.listen}: /metrics is plain HTTP without authentication and listens only on a loopback address (127.0.0.1, ::1, localhost) unless ${o.optIn} is also given; scrape through a local proxy or opt in knowingly`);
  }
  return { host: host.replace(/^\[|\]$/g, ''), port };
}

/**
 * Whether a request's Host header names this endpoint: an IP address literal (v4 or [v6], with
 * or without port: an attacker cannot make a browser send one for its own page), `localhost`,
 * this machine's host name, or one of `names` (the name the endpoint was told to listen on).
 * Anything else, a missing Host included, is a name someone else's DNS answers for.
 */
export function acceptsMetricsHost(host: string | undefined, names: readonly string[] = []): boolean {
  if (!host) return false;
  const m = /^(?:\[([^\]]+)\]|([^:\[\]]+))(?::\d{1,5})?$/.exec(host.trim());
  if (!m) return false;
  if (m[1] !== undefined) return isIP(m[1]) === 6;
  const name = m[2]!.toLowerCase().replace(/\.$/, '');
  if (isIP(name) === 4 || name === 'localhost') return true;
  return [hostname(), ...names].some((n) => n.toLowerCase().replace(/\.$/, '') === name);
}

export interface MetricsServer {
  port: number;
  /** host:port as bound, for logs and the README. */
  address: string;
  close(): Promise<void>;
}

export async function startMetricsServer(o: MetricsListenOptions & { registry: Registry; log: Logger }): Promise<MetricsServer> {
  const { host, port } = checkMetricsListen(o);
  // The listen address' host, when it is a name, is one the operator chose for the endpoint.
  const names = isIP(host) ? [] : [host];
  const server: Server = createServer((req, res) => {
    if (!acceptsMetricsHost(req.headers.host, names)) {
      res.writeHead(421, { 'content-type': 'text/plain' }).end('misdirected request: this /metrics answers only to its IP address, localhost or the host name of its machine\n');
      return;
    }
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: metrics are at /metrics\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('only GET and HEAD\n');
      return;
    }
    o.registry.metrics().then((text) => {
      res.writeHead(200, { 'content-type': o.registry.contentType });
      res.end(req.method === 'HEAD' ? undefined : text);
    }, (err: unknown) => {
      // A collector that throws must not take the process down; the scrape fails visibly instead.
      o.log.error({ err }, 'collecting metrics failed');
      res.writeHead(500, { 'content-type': 'text/plain' }).end(`collecting metrics failed: ${(err as Error).message}\n`);
    });
  });
  // Scrapes are small and quick: idle keep-alive sockets need not outlive a few scrape intervals.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new ConfigurationError(`${o.setting} ${o.listen}: cannot listen: ${err.message}`)));
    server.listen(port, host, () => resolve());
  });
  server.on('error', (err) => o.log.error({ err }, 'metrics endpoint error'));
  const bound = (server.address() as { port: number }).port;
  const address = `${host.includes(':') ? `[${host}]` : host}:${bound}`;
  return {
    port: bound,
    address,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
