// The local web server behind `mcctl dashboard`, like `kubectl proxy`: it listens on 127.0.0.1
// only and serves one page plus a server-sent-event stream fed by mcctl's own Watch of the
// control plane. The browser never talks to the control plane; nothing new listens there.
//
// Other users of the same machine can reach 127.0.0.1 too, so every request must carry the
// random token printed in the URL (as Jupyter does); without it, 403. The token is never on
// mcctl's command line (other users can read /proc/*/cmdline) and never in a cookie (cookies
// for 127.0.0.1 are shared by every port, so another local web server would receive it).

import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigurationError } from '../../machineconfig/index.ts';
import { DashboardModel } from './dashboard-model.ts';
import { DASHBOARD_HTML } from './dashboard-page.ts';
import { DASHBOARD_SCRIPT } from './dashboard-script.ts';
import { DASHBOARD_STYLE } from './dashboard-style.ts';

/** The one address the dashboard listens on. */
export const DASHBOARD_ADDRESS = '127.0.0.1';

export type ConnectionState = 'live' | 'reconnecting' | 'failed';

export interface DashboardServerOptions {
  port: number;
  /** The control plane's address, shown on the page. */
  controlPlane: string;
  /** Changes are sent to the pages at most this often, batched (a big rollout sends many). */
  flushMs?: number;
}

// Headers for every answer. The CSP allows only this origin's own script and style: even if a
// string from the server were ever inserted as markup, an inline handler in it would not run.
const SECURITY_HEADERS = {
  'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  // The token is in the URL: never send it on to another site.
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
};

const HEARTBEAT_MS = 15_000;

export class DashboardServer {
  readonly model = new DashboardModel();
  readonly token = randomBytes(24).toString('hex');
  readonly #clients = new Set<ServerResponse>();
  readonly #options: DashboardServerOptions;
  #connection: { state: ConnectionState; message: string } = { state: 'live', message: '' };
  #http: Server | undefined;
  #flushTimer: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;

  constructor(options: DashboardServerOptions) {
    this.#options = options;
  }

  /** Listens on 127.0.0.1; resolves with the URL to open (token included). */
  async start(): Promise<string> {
    const http = createServer((req, res) => this.#handle(req, res));
    this.#http = http;
    await new Promise<void>((resolve, reject) => {
      http.once('error', (err: NodeJS.ErrnoException) => {
        reject(err.code === 'EADDRINUSE'
          ? new ConfigurationError(`mcctl dashboard: --port ${this.#options.port}: port ${this.#options.port} on ${DASHBOARD_ADDRESS} is in use; choose another port, or --port 0 for any free one`)
          : err);
      });
      http.listen(this.#options.port, DASHBOARD_ADDRESS, () => resolve());
    });
    this.#heartbeat = setInterval(() => this.#broadcast(': keep-alive\n\n'), HEARTBEAT_MS);
    this.#heartbeat.unref();
    return `http://${DASHBOARD_ADDRESS}:${(http.address() as AddressInfo).port}/?token=${this.token}`;
  }

  /** Call after feeding the model: the pages get the change within flushMs. */
  changed(): void {
    this.#flushTimer ??= setTimeout(() => {
      this.#flushTimer = undefined;
      const update = this.model.takeUpdate();
      if (update) this.#broadcast(sse('update', update));
    }, this.#options.flushMs ?? 100);
  }

  /** The control plane reached or lost, as the page's banner says it. */
  setConnection(state: ConnectionState, message = ''): void {
    this.#connection = { state, message };
    this.#broadcast(sse('connection', this.#connection));
  }

  async close(): Promise<void> {
    clearTimeout(this.#flushTimer);
    clearInterval(this.#heartbeat);
    for (const res of this.#clients) res.end();
    this.#clients.clear();
    const http = this.#http;
    if (!http) return;
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', `http://${DASHBOARD_ADDRESS}`);
    } catch {
      return text(res, 400, 'bad request URL');
    }
    // Another page the browser has open could point a name it controls at 127.0.0.1 (DNS
    // rebinding); the token already stops it, and a foreign Host name is refused as well.
    const host = (req.headers.host ?? '').replace(/:\d+$/, '');
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(host)) {
      return text(res, 403, `forbidden: the dashboard answers only to http://${DASHBOARD_ADDRESS} (Host: ${host || 'none'})`);
    }
    if (!this.#tokenMatches(url.searchParams.get('token'))) {
      return text(res, 403, 'forbidden: open the URL `mcctl dashboard` printed, with its ?token=...; the token changes each time the dashboard starts');
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      return text(res, 405, 'only GET and HEAD');
    }
    switch (url.pathname) {
      case '/':
        return send(res, 'text/html; charset=utf-8', DASHBOARD_HTML.replaceAll('{{TOKEN}}', this.token));
      case '/dashboard.js':
        return send(res, 'text/javascript; charset=utf-8', DASHBOARD_SCRIPT);
      case '/dashboard.css':
        return send(res, 'text/css; charset=utf-8', DASHBOARD_STYLE);
      case '/events':
        return this.#events(req, res);
      default:
        return text(res, 404, `not found: ${url.pathname}`);
    }
  }

  #tokenMatches(given: string | null): boolean {
    if (!given) return false;
    const a = Buffer.from(given);
    const b = Buffer.from(this.token);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  /** A server-sent-event stream: everything now, then each batch of changes. */
  #events(req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, { ...SECURITY_HEADERS, 'Content-Type': 'text/event-stream; charset=utf-8', Connection: 'keep-alive' });
    if (req.method === 'HEAD') return void res.end();
    // A new stream starts from the full state: first take what is pending for the others, so
    // this page does not get those changes twice.
    const pending = this.model.takeUpdate();
    if (pending) this.#broadcast(sse('update', pending));
    res.write('retry: 2000\n\n');
    res.write(sse('snapshot', { controlPlane: this.#options.controlPlane, serverNowMs: Date.now(), connection: this.#connection, ...this.model.snapshot() }));
    this.#clients.add(res);
    const drop = (): void => void this.#clients.delete(res);
    req.once('close', drop);
    res.once('error', drop);
  }

  #broadcast(chunk: string): void {
    for (const res of this.#clients) res.write(chunk);
  }
}

function sse(event: string, data: unknown): string {
  // JSON has no raw newlines, so the payload is one data: line.
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

function send(res: ServerResponse, type: string, body: string): void {
  res.writeHead(200, { ...SECURITY_HEADERS, 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(body + '\n');
}
