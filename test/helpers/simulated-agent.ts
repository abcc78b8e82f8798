// A stand-in for mcplane-agent that speaks the real AgentService protocol over real gRPC/TLS,
// for tests and benchmarks of the control plane. It applies nothing: on an assignment it can
// report Done at once (autoDone), or wait for the test to report.

import { readFileSync, writeFileSync } from 'node:fs';
import { scaled } from './time-scale.ts';
import type { ClientDuplexStream, ServiceError } from '@grpc/grpc-js';
import { CLIENT_CHANNEL_OPTIONS } from '../../src/runtime/grpc-options.ts';
import { loadMcplaneProto } from '../../src/runtime/proto.ts';
import { certificateBinding, certificateValidity, createCertificateRequest } from '../../src/runtime/pki.ts';
import { clientCredentials } from '../../src/runtime/tls.ts';
import type { AgentMessage } from '../../src/runtime/generated/mcplane/v1/AgentMessage.ts';
import type { AgentServiceClient } from '../../src/runtime/generated/mcplane/v1/AgentService.ts';
import type { Assignment__Output } from '../../src/runtime/generated/mcplane/v1/Assignment.ts';
import type { NodeStatus } from '../../src/runtime/generated/mcplane/v1/NodeStatus.ts';
import type { ServerMessage__Output } from '../../src/runtime/generated/mcplane/v1/ServerMessage.ts';

export interface SimulatedAgentOptions {
  address: string;
  /** Other replicas: when the stream breaks, the agent re-registers on the next one. */
  failover?: string[];
  /** Delay before reporting Done after an assignment (with autoDone). */
  doneAfterMs?: number;
  tls: { ca: string; cert: string; key: string };
  name: string;
  labels?: Record<string, string>;
  /** Register as this node instead of `name` (to test impersonation). */
  registerAs?: string;
  autoDone?: boolean;
  currentConfig?: string;
  /**
   * Renew the certificate over the stream at two thirds of its life, as mcplane-agent does, and
   * switch to a stream opened with the new one (the old ends once the new is registered).
   */
  autoRenew?: boolean;
  /** Write renewed certificates, keys and bundles back to the tls files. */
  writeRenewed?: boolean;
}

export interface Renewal {
  at: number;
  serial: string;
  issuer: string;
  address: string;
}

/** Increases with every assignment any simulated agent in this process receives. */
let assignmentSequence = 0;

export class SimulatedAgent {
  readonly assignments: (Assignment__Output & { sequence: number; receivedAt: number })[] = [];
  /** When the agent first reported Done on each config. */
  readonly doneAt = new Map<string, number>();
  readonly commands: ServerMessage__Output['command'][] = [];
  pool: string | undefined;
  error: ServiceError | undefined;
  /** The server ended the stream (cleanly or with an error). */
  ended = false;
  status: NodeStatus;
  /** The address of the replica the current stream goes to. */
  connectedTo: string;
  /** When each stream after the first was registered (failover tests measure the gap). */
  readonly reconnects: { at: number; address: string }[] = [];
  /** When a stream last broke. */
  brokeAt = 0;
  /** Streams the agent did not retire itself: ended by the server or broken. */
  drops = 0;
  readonly renewals: Renewal[] = [];
  readonly renewalFailures: { code: string; message: string }[] = [];
  #clients = new Map<string, AgentServiceClient>();
  /** Channels are per certificate: a renewed one needs a new TLS connection. */
  #generation = 0;
  #pendingRenewal: { resolve: (m: NonNullable<ServerMessage__Output['certificate']>) => void; reject: (e: Error) => void } | undefined;
  #renewTimer: NodeJS.Timeout | undefined;
  #renewing: Promise<void> | undefined;
  #tls: { ca: Buffer; cert: Buffer; key: Buffer };
  #stream: ClientDuplexStream<AgentMessage, ServerMessage__Output> | undefined;
  #waiters: (() => void)[] = [];
  #closed = false;

  readonly options: SimulatedAgentOptions;
  constructor(options: SimulatedAgentOptions) {
    this.options = options;
    this.#tls = { ca: readFileSync(options.tls.ca), cert: readFileSync(options.tls.cert), key: readFileSync(options.tls.key) };
    this.connectedTo = options.address;
    this.status = { currentConfig: options.currentConfig ?? '', desiredConfig: '', state: 'Done', phase: 'done', reason: '' };
  }

  #client(address: string): AgentServiceClient {
    const key = `${this.#generation} ${address}`;
    let client = this.#clients.get(key);
    if (!client) {
      const { grpc } = loadMcplaneProto();
      client = new grpc.mcplane.v1.AgentService(address, clientCredentials(this.#tls), CLIENT_CHANNEL_OPTIONS);
      this.#clients.set(key, client);
    }
    return client;
  }

  /** The certificate the agent holds now (PEM). */
  get certificatePem(): string {
    return this.#tls.cert.toString();
  }

  /** The key of that certificate (PEM). */
  get keyPem(): string {
    return this.#tls.key.toString();
  }

  /**
   * Asks for a new certificate over the open stream, then opens a stream with it to the same
   * replica; the old one is ended by the server once the new one has registered.
   */
  renew(): Promise<void> {
    this.#renewing ??= this.#renew().finally(() => { this.#renewing = undefined; });
    return this.#renewing;
  }

  /**
   * Asks for a new certificate over the open stream and keeps the stream as it is (an agent that
   * never switches, or a thief holding several generations of a node's certificates).
   */
  async requestCertificate(): Promise<{ certificatePem: string; caBundlePem: string; keyPem: string }> {
    const stream = this.#stream;
    if (!stream) throw new Error(`${this.options.name}: not connected`);
    const { csrPem, keyPem } = await createCertificateRequest(this.options.name);
    const answer = new Promise<NonNullable<ServerMessage__Output['certificate']>>((resolve, reject) => {
      this.#pendingRenewal = { resolve, reject };
      setTimeout(() => reject(new Error(`${this.options.name}: no answer to the renewal within 10 s`)), 10_000).unref();
    });
    stream.write({ renew: { csrPem } });
    return { ...(await answer), keyPem };
  }

  async #renew(): Promise<void> {
    const { keyPem, ...issued } = await this.requestCertificate();
    this.#tls = { ca: Buffer.from(issued.caBundlePem), cert: Buffer.from(issued.certificatePem), key: Buffer.from(keyPem) };
    if (this.options.writeRenewed) {
      writeFileSync(this.options.tls.key, keyPem);
      writeFileSync(this.options.tls.cert, issued.certificatePem);
      writeFileSync(this.options.tls.ca, issued.caBundlePem);
    }
    const v = certificateValidity(issued.certificatePem);
    this.renewals.push({ at: Date.now(), serial: certificateBinding(issued.certificatePem).serial, issuer: v.issuer, address: this.connectedTo });
    const old = [...this.#clients.values()];
    this.#generation++;
    await this.connect(this.connectedTo);
    if (this.error || this.pool === undefined) throw new Error(`${this.options.name}: the stream with the renewed certificate failed: ${this.error?.details}`);
    // Let the old channel go once the server has ended the stream on it.
    setTimeout(() => { for (const c of old) c.close(); }, 2000).unref();
  }

  #scheduleRenewal(): void {
    clearTimeout(this.#renewTimer);
    if (!this.options.autoRenew || this.#closed) return;
    const wait = Math.max(0, certificateValidity(this.#tls.cert).renewAt - Date.now());
    // Days away (a certificate from mcctl pki node): the test renews by hand.
    if (wait > 2 ** 31 - 1) return;
    this.#renewTimer = setTimeout(() => {
      this.renew().catch((err: Error & { code?: string }) => {
        this.renewalFailures.push({ code: err.code ?? '', message: err.message });
        if (!this.#closed) this.#renewTimer = setTimeout(() => this.#scheduleRenewal(), 300);
      });
    }, wait);
  }

  /** Opens the stream and registers; resolves when the server says which pool, or on error. */
  connect(address = this.connectedTo): Promise<void> {
    this.connectedTo = address;
    this.pool = undefined;
    const stream = this.#client(address).connect();
    this.#stream = stream;
    stream.on('data', (m: ServerMessage__Output) => {
      if (stream !== this.#stream) return;
      if (m.registered) {
        this.pool = m.registered.pool;
        this.#scheduleRenewal();
      }
      if (m.certificate) this.#pendingRenewal?.resolve(m.certificate);
      if (m.renewalFailed) this.#pendingRenewal?.reject(Object.assign(new Error(m.renewalFailed.message), { code: m.renewalFailed.code }));
      if (m.assignment) {
        this.assignments.push({ ...m.assignment, sequence: ++assignmentSequence, receivedAt: Date.now() });
        const { renderedConfig } = m.assignment;
        const done = (): void => {
          if (this.#closed || this.lastAssignment?.renderedConfig !== renderedConfig) return;
          if (!this.doneAt.has(renderedConfig)) this.doneAt.set(renderedConfig, Date.now());
          this.report({ currentConfig: renderedConfig, desiredConfig: renderedConfig, state: 'Done', phase: 'done' });
        };
        if (this.options.autoDone && this.status.currentConfig !== renderedConfig) {
          if (this.options.doneAfterMs) {
            this.report({ desiredConfig: renderedConfig, state: 'Working', phase: 'apply' });
            setTimeout(done, this.options.doneAfterMs);
          } else {
            done();
          }
        }
      }
      if (m.command) this.commands.push(m.command);
      this.#notify();
    });
    const broken = (err?: ServiceError): void => {
      if (stream !== this.#stream) return;
      if (err) this.error = err;
      this.ended = true;
      if (!this.#closed) this.drops++;
      this.#stream = undefined;
      this.brokeAt = Date.now();
      this.#notify();
      if (this.options.failover?.length && !this.#closed) setTimeout(() => void this.#failover(), 50 + Math.random() * 100);
    };
    stream.on('error', (err: ServiceError) => broken(err));
    stream.on('end', () => broken());
    stream.write({ register: { nodeName: this.options.registerAs ?? this.options.name, labels: this.options.labels ?? { 'node-role.kubernetes.io/worker': '' }, bootId: 'boot-1', agentVersion: 'simulated', status: this.status } });
    return this.waitFor(() => this.pool !== undefined || this.error !== undefined, 10_000);
  }

  /** The next address after the one that broke, round the list, until one takes us. */
  async #failover(): Promise<void> {
    const all = [this.options.address, ...(this.options.failover ?? [])];
    let i = all.indexOf(this.connectedTo);
    while (!this.#closed) {
      i = (i + 1) % all.length;
      this.error = undefined;
      this.ended = false;
      await this.connect(all[i]).catch(() => undefined);
      if (this.pool !== undefined && !this.ended) {
        this.reconnects.push({ at: Date.now(), address: all[i]! });
        this.#notify();
        return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  report(status: Partial<NodeStatus>): void {
    this.status = { ...this.status, ...status };
    this.#stream?.write({ status: { status: this.status } });
    this.#notify();
  }

  get lastAssignment(): Assignment__Output | undefined {
    return this.assignments.at(-1);
  }

  waitFor(predicate: () => boolean, quietTimeoutMs = 10_000): Promise<void> {
    if (predicate()) return Promise.resolve();
    const timeoutMs = scaled(quietTimeoutMs);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.options.name}: condition not met within ${timeoutMs} ms`)), timeoutMs);
      const check = (): void => {
        if (predicate()) {
          clearTimeout(timer);
          resolve();
        } else {
          this.#waiters.push(check);
        }
      };
      this.#waiters.push(check);
    });
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#renewTimer);
    this.#stream?.end();
    this.#stream?.cancel();
    for (const client of this.#clients.values()) client.close();
  }

  #notify(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }
}

/** Polls until `predicate` holds (for state the test reads from the server). */
/**
 * Waits until every agent satisfies `predicate`, however long that takes while they keep coming:
 * it fails only when none has joined the satisfied ones for `quietStallMs` (scaled), so work that
 * grows with the number of agents and the machine's load (500 TLS handshakes on two busy cores)
 * is waited for, and a stuck one is still named.
 */
export async function everyAgent(agents: readonly SimulatedAgent[], predicate: (a: SimulatedAgent) => boolean, what: string, quietStallMs = 20_000): Promise<void> {
  const stallMs = scaled(quietStallMs);
  let best = -1;
  let progressAt = Date.now();
  for (;;) {
    const missing = agents.filter((a) => !predicate(a));
    if (missing.length === 0) return;
    const done = agents.length - missing.length;
    if (done > best) {
      best = done;
      progressAt = Date.now();
    } else if (Date.now() - progressAt > stallMs) {
      throw new Error(`${what}: ${done} of ${agents.length} agents, none more for ${stallMs} ms; the first missing: ${missing.slice(0, 5).map((a) => a.options.name).join(', ')}${missing[0]!.error ? ` (${missing[0]!.error.message})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function eventually(predicate: () => boolean | Promise<boolean>, quietTimeoutMs = 10_000, what = 'condition'): Promise<void> {
  const timeoutMs = scaled(quietTimeoutMs);
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
