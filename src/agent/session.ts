// The agent's side of AgentService.Connect: one stream, re-opened with exponential backoff and
// jitter when it drops. With several control plane addresses, each re-open goes to the next one
// in turn, so the loss of one replica moves the agent to another. On every (re)connect the agent
// registers with its full state; after that it sends status when it changes, plus a light
// heartbeat. While disconnected nothing new can arrive, so nothing new is applied.
//
// The client certificate is renewed over the stream at two thirds of its life. The new key and
// certificate are stored (certificate-store.ts), then a second stream is opened with them on a
// new channel (a channel's TLS identity is fixed) to the same server; once it has registered it
// becomes the stream and the old one is let go. Nothing is ever without a stream, and the agent
// never restarts.

import type { ClientDuplexStream, ServiceError } from '@grpc/grpc-js';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import type { NodeStatus } from '../machineconfig/index.ts';
import { CLIENT_CHANNEL_OPTIONS } from '../runtime/grpc-options.ts';
import type { AgentMessage } from '../runtime/generated/mcplane/v1/AgentMessage.ts';
import type { AgentServiceClient } from '../runtime/generated/mcplane/v1/AgentService.ts';
import type { Assignment__Output } from '../runtime/generated/mcplane/v1/Assignment.ts';
import type { ServerMessage__Output } from '../runtime/generated/mcplane/v1/ServerMessage.ts';
import type { Logger } from '../runtime/logger.ts';
import { loadClientContract } from '../runtime/client-contract.ts';
import { clientCredentials, readTlsFiles, type TlsFiles, type TlsMaterial } from '../runtime/tls.ts';
import { storeRenewedCertificate } from './certificate-store.ts';

type Stream = ClientDuplexStream<AgentMessage, ServerMessage__Output>;
type Issued = NonNullable<ServerMessage__Output['certificate']>;
type Refused = NonNullable<ServerMessage__Output['renewalFailed']>;

/** How long to wait for the answer to a renewal before asking again. */
const RENEWAL_ANSWER_MS = 60_000;

export interface SessionOptions {
  /** Control plane addresses, tried in turn. */
  servers: string[];
  tls: TlsMaterial | undefined;
  /**
   * Where the TLS material lives: renewed certificates are written there, and the files are
   * read again before each reconnect (a trust bundle an operator replaced is picked up).
   * Absent: no renewal.
   */
  tlsFiles?: TlsFiles;
  nodeName: string;
  labels: Record<string, string>;
  agentVersion: string;
  heartbeatMs: number;
  bootId: () => string;
  /** The status to register with until the agent reports another (report() pushes each change). */
  status: NodeStatus;
  onAssignment: (a: Assignment__Output) => void;
  onForceReapply: (requestedBy: string) => void;
  /** mcctl confirm: the try of `config` is confirmed by hand. */
  onConfirmTry?: (config: string, requestedBy: string) => void;
  log: Logger;
  backoff?: { initialMs: number; maxMs: number };
}

export class AgentSession {
  readonly #o: SessionOptions;
  #clients = new Map<string, AgentServiceClient>();
  #tls: TlsMaterial | undefined;
  /** Bumped when the TLS material changes: channels are made per generation and address. */
  #generation = 0;
  #next = 0;
  /** The address of the stream open now (or last opened). */
  server = '';
  #stream: Stream | undefined;
  /** A stream opened with a renewed certificate, registering; it replaces #stream when it has. */
  #candidate: Stream | undefined;
  #renewTimer: NodeJS.Timeout | undefined;
  #renewing = false;
  #pendingRenewal: { resolve: (m: Issued) => void; reject: (m: Refused) => void } | undefined;
  /** Renewals that got no certificate in a row (for the backoff). */
  #renewalFailures = 0;
  /** Renewals done since start (tests and the log read it). */
  renewals = 0;
  #connected = false;
  #stopped = false;
  #delay: number;
  #retry: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  /** The node's latest status, as the agent last pushed it. */
  #status: NodeStatus;
  #lastSent = '';
  pool = '';

  constructor(options: SessionOptions) {
    this.#o = options;
    this.#delay = options.backoff?.initialMs ?? 1000;
    this.#tls = options.tls;
    this.#status = options.status;
    if (options.servers.length === 0) throw new Error('no control plane address');
  }

  /**
   * One channel per address and TLS generation, made when first used and kept (grpc-js
   * reconnects it itself); a new certificate or trust bundle needs a new TLS connection.
   */
  #client(address: string): AgentServiceClient {
    const key = `${this.#generation} ${address}`;
    let client = this.#clients.get(key);
    if (!client) {
      client = new (loadClientContract().AgentService)(address, clientCredentials(this.#tls), CLIENT_CHANNEL_OPTIONS);
      this.#clients.set(key, client);
    }
    return client;
  }

  /** Closes the channels of older generations (their streams have ended or been let go). */
  #closeOldChannels(): void {
    for (const [key, client] of this.#clients) {
      if (!key.startsWith(`${this.#generation} `)) {
        client.close();
        this.#clients.delete(key);
      }
    }
  }

  /** New TLS material: later streams use it. */
  #useTls(material: TlsMaterial): void {
    this.#tls = material;
    this.#generation++;
  }

  /** Reads the TLS files again before a reconnect; a change (a replaced bundle) is used from now. */
  #refreshTls(): void {
    if (!this.#o.tlsFiles || !this.#tls) return;
    try {
      const m = readTlsFiles(this.#o.tlsFiles, 'agent TLS');
      if (!m.ca.equals(this.#tls.ca) || !m.cert.equals(this.#tls.cert) || !m.key.equals(this.#tls.key)) {
        // A pair caught half copied is not taken: the next reconnect reads it again.
        if (!new X509Certificate(m.cert).checkPrivateKey(createPrivateKey(m.key))) throw new Error(`${this.#o.tlsFiles.key} is not the key of ${this.#o.tlsFiles.cert}`);
        this.#o.log.info({ ca: this.#o.tlsFiles.ca, cert: this.#o.tlsFiles.cert }, 'TLS files changed on disk; using them from this connection on');
        this.#useTls(m);
        this.#closeOldChannels();
      }
    } catch (err) {
      this.#o.log.warn({ err: (err as Error).message }, 'cannot read the TLS files again; using the ones read before');
    }
  }

  get connected(): boolean {
    return this.#connected;
  }

  start(): void {
    this.#open();
  }

  /** Takes the node's latest status (pushed by the agent) and sends it if it differs from what the server last got. */
  report(status: NodeStatus = this.#status): void {
    this.#status = status;
    if (!this.#connected || !this.#stream) return;
    const text = JSON.stringify(status);
    if (text === this.#lastSent) return;
    this.#lastSent = text;
    this.#stream.write({ status: { status } });
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retry);
    clearTimeout(this.#renewTimer);
    clearInterval(this.#heartbeat);
    this.#candidate?.cancel();
    this.#stream?.end();
    this.#stream?.cancel();
    for (const client of this.#clients.values()) client.close();
  }

  /**
   * Opens a stream to the next address, or (`switchTo`) a second stream to that address that
   * takes over from the current one once it has registered.
   */
  #open(switchTo?: string): void {
    if (this.#stopped) return;
    let server: string;
    if (switchTo) {
      server = switchTo;
    } else {
      server = this.#o.servers[this.#next % this.#o.servers.length]!;
      this.#next = (this.#next + 1) % this.#o.servers.length;
      this.server = server;
    }
    const stream = this.#client(server).connect();
    if (switchTo) this.#candidate = stream;
    else this.#stream = stream;
    let registered = false;
    const status = this.#status;
    const registeredWith = JSON.stringify(status);
    stream.on('data', (m: ServerMessage__Output) => {
      if (m.registered) {
        registered = true;
        if (this.#candidate === stream) {
          // The new stream is in: the old one is let go (the server has ended it already, as
          // the node's session moved to this stream).
          const old = this.#stream;
          this.#stream = stream;
          this.#candidate = undefined;
          this.server = server;
          old?.end();
          old?.cancel();
          this.#closeOldChannels();
          this.#o.log.info({ server }, 'switched to a stream opened with the renewed certificate');
        }
        if (this.#stream !== stream) return;
        this.#connected = true;
        this.#lastSent = registeredWith;
        this.pool = m.registered.pool;
        this.#delay = this.#o.backoff?.initialMs ?? 1000;
        this.#o.log.info({ server, pool: m.registered.pool || undefined }, 'connected to the control plane');
        this.#scheduleRenewal();
        // A status that changed while this stream registered goes out now.
        this.report();
      }
      if (this.#stream !== stream) return;
      if (m.assignment) this.#o.onAssignment(m.assignment);
      if (m.command?.forceReapply) this.#o.onForceReapply(m.command.forceReapply.requestedBy);
      if (m.command?.confirmTry) this.#o.onConfirmTry?.(m.command.confirmTry.config, m.command.confirmTry.requestedBy);
      if (m.certificate) this.#pendingRenewal?.resolve(m.certificate);
      if (m.renewalFailed) this.#pendingRenewal?.reject(m.renewalFailed);
    });
    const lost = (err?: ServiceError): void => {
      if (this.#candidate === stream) {
        // The switch failed; the current stream goes on, and the next renewal or reconnect uses
        // the renewed certificate (it is stored).
        this.#candidate = undefined;
        this.#o.log.warn({ server, code: err?.code, details: err?.details }, 'the stream with the renewed certificate failed; keeping the current one');
        if (!this.#stream && !this.#stopped) this.#retry = setTimeout(() => this.#open(), this.#delay);
        return;
      }
      if (this.#stream !== stream) return;
      this.#pendingRenewal?.reject({ code: 'MCPLANE_UNAVAILABLE', message: 'the stream ended before the answer', retryAfterSeconds: 0 });
      if (this.#candidate) {
        // The old stream ended first (the server let it go as the new one registered): the
        // candidate, already registering, is the stream now.
        this.#stream = this.#candidate;
        this.#candidate = undefined;
        return;
      }
      this.#stream = undefined;
      this.#connected = false;
      this.#lastSent = '';
      clearTimeout(this.#renewTimer);
      if (this.#stopped) return;
      const wait = this.#delay * (0.5 + Math.random());
      this.#delay = Math.min(this.#delay * 2, this.#o.backoff?.maxMs ?? 60_000);
      // A replica lost mid-session: in list order, every one of its agents would move to the same
      // next address, and that replica alone would take the storm of re-registrations (1,667
      // agents at 5,000 on three replicas: docs/sizing.md). Each goes to one of the others at
      // random. Attempts that never registered keep the order, so every address gets its turn.
      if (registered && this.#o.servers.length > 2) {
        const others = this.#o.servers.flatMap((s, i) => (s === server ? [] : [i]));
        this.#next = others[Math.floor(Math.random() * others.length)]!;
      }
      const nextServer = this.#o.servers[this.#next % this.#o.servers.length];
      this.#o.log.warn({ server, code: err?.code, details: err?.details, registered, retryInMs: Math.round(wait), next: nextServer }, 'control plane stream lost; reconnecting');
      this.#retry = setTimeout(() => {
        this.#refreshTls();
        this.#open();
      }, wait);
    };
    stream.on('error', lost);
    stream.on('end', () => lost());
    stream.write({
      register: { nodeName: this.#o.nodeName, labels: this.#o.labels, bootId: this.#o.bootId(), agentVersion: this.#o.agentVersion, status },
    });
    if (!this.#heartbeat) {
      this.#heartbeat = setInterval(() => {
        if (this.#connected) this.#stream?.write({ heartbeat: {} });
      }, this.#o.heartbeatMs);
      this.#heartbeat.unref();
    }
  }

  /** Renews at two thirds of the certificate's life (at once when past that). */
  #scheduleRenewal(delayMs?: number): void {
    clearTimeout(this.#renewTimer);
    if (!this.#o.tlsFiles || !this.#tls || this.#stopped || this.#renewing) return;
    let wait = delayMs;
    if (wait === undefined) {
      const cert = new X509Certificate(this.#tls.cert);
      const notBefore = Date.parse(cert.validFrom);
      const renewAt = notBefore + ((Date.parse(cert.validTo) - notBefore) * 2) / 3;
      wait = Math.max(0, renewAt - Date.now());
    }
    // setTimeout holds at most 2^31-1 ms (24.8 days): a longer wait is taken in steps.
    const step = Math.min(wait, 2 ** 31 - 1);
    this.#renewTimer = setTimeout(() => (step < wait! ? this.#scheduleRenewal(wait! - step) : void this.#renew()), step);
    this.#renewTimer.unref();
  }

  async #renew(): Promise<void> {
    const stream = this.#stream;
    const files = this.#o.tlsFiles;
    if (!stream || !this.#connected || !files || this.#renewing || this.#candidate) return;
    this.#renewing = true;
    const server = this.server;
    let retryMs: number | undefined;
    try {
      // Loaded only here: the X.509 library is the largest thing the agent would otherwise keep.
      const { certificateProblem, createCertificateRequest } = await import('../runtime/pki.ts');
      const { csrPem, keyPem } = await createCertificateRequest(this.#o.nodeName);
      const answer = new Promise<Issued>((resolve, reject) => {
        this.#pendingRenewal = { resolve, reject };
        setTimeout(() => reject({ code: 'MCPLANE_TIMEOUT', message: `no answer within ${RENEWAL_ANSWER_MS / 1000} s`, retryAfterSeconds: 0 }), RENEWAL_ANSWER_MS).unref();
      });
      stream.write({ renew: { csrPem } });
      let issued: Issued;
      try {
        issued = await answer;
      } catch (refused) {
        const r = refused as Refused;
        this.#renewalFailures++;
        const cert = new X509Certificate(this.#tls!.cert);
        const life = Date.parse(cert.validTo) - Date.parse(cert.validFrom);
        // Asked again within the remaining third of the life, a few times: a tenth of the
        // life, doubled each time, at least a second and at most 10 minutes.
        retryMs = Math.max(r.retryAfterSeconds * 1000, Math.min(600_000, Math.max(1000, (life / 10) * 2 ** Math.min(this.#renewalFailures - 1, 4))));
        this.#o.log.warn({ server, code: r.code, err: r.message, retryInMs: Math.round(retryMs) }, 'certificate renewal refused; asking again later');
        // A replica that cannot sign: the next attempt goes through the next one.
        if (r.code === 'MCPLANE_PRECONDITION_FAILED' && this.#o.servers.length > 1) {
          const next = this.#o.servers[(this.#o.servers.indexOf(server) + 1) % this.#o.servers.length]!;
          this.#open(next);
        }
        return;
      }
      const problem = certificateProblem(issued.certificatePem, keyPem, issued.caBundlePem, this.#o.nodeName);
      if (problem) {
        this.#renewalFailures++;
        retryMs = 60_000;
        this.#o.log.error({ server, problem }, 'the renewed certificate is not usable; keeping the current one');
        return;
      }
      storeRenewedCertificate(files, { key: keyPem, cert: issued.certificatePem, ca: issued.caBundlePem });
      const cert = new X509Certificate(issued.certificatePem);
      this.#renewalFailures = 0;
      this.renewals++;
      this.#useTls({ ca: Buffer.from(issued.caBundlePem), cert: Buffer.from(issued.certificatePem), key: Buffer.from(keyPem) });
      this.#o.log.info({ server, serial: cert.serialNumber.toLowerCase(), notAfter: new Date(cert.validTo).toISOString(), issuer: cert.issuer.replaceAll('\n', ', ') }, 'node certificate renewed; switching to a stream opened with it');
      this.#open(this.server);
    } catch (err) {
      this.#renewalFailures++;
      retryMs = 30_000;
      this.#o.log.error({ err: (err as Error).message }, 'certificate renewal failed; asking again later');
    } finally {
      this.#pendingRenewal = undefined;
      this.#renewing = false;
      if (retryMs !== undefined) this.#scheduleRenewal(retryMs);
    }
  }
}
