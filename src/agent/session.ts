// The agent's side of AgentService.Connect: one stream, re-opened with exponential backoff and
// jitter when it drops. With several control plane addresses, each re-open goes to the next one
// in turn, so the loss of one replica moves the agent to another. On every (re)connect the agent
// registers with its full state; after that it sends status when it changes, plus a light
// heartbeat. While disconnected nothing new can arrive, so nothing new is applied.

import type { ClientDuplexStream, ServiceError } from '@grpc/grpc-js';
import type { NodeStatus } from '../machineconfig/index.ts';
import { CLIENT_CHANNEL_OPTIONS } from '../runtime/grpc-options.ts';
import type { AgentMessage } from '../runtime/generated/mcplane/v1/AgentMessage.ts';
import type { AgentServiceClient } from '../runtime/generated/mcplane/v1/AgentService.ts';
import type { Assignment__Output } from '../runtime/generated/mcplane/v1/Assignment.ts';
import type { ServerMessage__Output } from '../runtime/generated/mcplane/v1/ServerMessage.ts';
import type { Logger } from '../runtime/logger.ts';
import { loadMcplaneProto } from '../runtime/proto.ts';
import { clientCredentials, type TlsMaterial } from '../runtime/tls.ts';

export interface SessionOptions {
  /** Control plane addresses, tried in turn. */
  servers: string[];
  tls: TlsMaterial | undefined;
  nodeName: string;
  labels: Record<string, string>;
  agentVersion: string;
  heartbeatMs: number;
  bootId: () => string;
  status: () => NodeStatus;
  onAssignment: (a: Assignment__Output) => void;
  onForceReapply: (requestedBy: string) => void;
  log: Logger;
  backoff?: { initialMs: number; maxMs: number };
}

export class AgentSession {
  readonly #o: SessionOptions;
  #clients = new Map<string, AgentServiceClient>();
  #next = 0;
  /** The address of the stream open now (or last opened). */
  server = '';
  #stream: ClientDuplexStream<AgentMessage, ServerMessage__Output> | undefined;
  #connected = false;
  #stopped = false;
  #delay: number;
  #retry: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #lastSent = '';
  pool = '';

  constructor(options: SessionOptions) {
    this.#o = options;
    this.#delay = options.backoff?.initialMs ?? 1000;
    if (options.servers.length === 0) throw new Error('no control plane address');
  }

  /** One channel per address, made when first used and kept (grpc-js reconnects it itself). */
  #client(address: string): AgentServiceClient {
    let client = this.#clients.get(address);
    if (!client) {
      const { grpc } = loadMcplaneProto();
      client = new grpc.mcplane.v1.AgentService(address, clientCredentials(this.#o.tls), CLIENT_CHANNEL_OPTIONS);
      this.#clients.set(address, client);
    }
    return client;
  }

  get connected(): boolean {
    return this.#connected;
  }

  start(): void {
    this.#open();
  }

  /** Sends the status if it differs from what the server last got. */
  report(): void {
    if (!this.#connected || !this.#stream) return;
    const status = this.#o.status();
    const text = JSON.stringify(status);
    if (text === this.#lastSent) return;
    this.#lastSent = text;
    this.#stream.write({ status: { status } });
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retry);
    clearInterval(this.#heartbeat);
    this.#stream?.end();
    this.#stream?.cancel();
    for (const client of this.#clients.values()) client.close();
  }

  #open(): void {
    if (this.#stopped) return;
    const server = this.#o.servers[this.#next % this.#o.servers.length]!;
    this.#next = (this.#next + 1) % this.#o.servers.length;
    this.server = server;
    const stream = this.#client(server).connect();
    this.#stream = stream;
    let registered = false;
    stream.on('data', (m: ServerMessage__Output) => {
      if (m.registered) {
        registered = true;
        this.#connected = true;
        this.pool = m.registered.pool;
        this.#delay = this.#o.backoff?.initialMs ?? 1000;
        this.#o.log.info({ server, pool: m.registered.pool || undefined }, 'connected to the control plane');
      }
      if (m.assignment) this.#o.onAssignment(m.assignment);
      if (m.command?.forceReapply) this.#o.onForceReapply(m.command.forceReapply.requestedBy);
    });
    const lost = (err?: ServiceError): void => {
      if (this.#stream !== stream) return;
      this.#stream = undefined;
      this.#connected = false;
      this.#lastSent = '';
      clearInterval(this.#heartbeat);
      if (this.#stopped) return;
      const wait = this.#delay * (0.5 + Math.random());
      this.#delay = Math.min(this.#delay * 2, this.#o.backoff?.maxMs ?? 60_000);
      const nextServer = this.#o.servers[this.#next % this.#o.servers.length];
      this.#o.log.warn({ server, code: err?.code, details: err?.details, registered, retryInMs: Math.round(wait), next: nextServer }, 'control plane stream lost; reconnecting');
      this.#retry = setTimeout(() => this.#open(), wait);
    };
    stream.on('error', lost);
    stream.on('end', () => lost());
    const status = this.#o.status();
    this.#lastSent = JSON.stringify(status);
    stream.write({
      register: { nodeName: this.#o.nodeName, labels: this.#o.labels, bootId: this.#o.bootId(), agentVersion: this.#o.agentVersion, status },
    });
    this.#heartbeat = setInterval(() => {
      if (this.#connected) stream.write({ heartbeat: {} });
    }, this.#o.heartbeatMs);
    this.#heartbeat.unref();
  }
}
