// The agent streams this replica holds, and their session records in the store. A session
// record lives on the replica's lease, so "connected" means a replica that is alive holds the
// stream, whichever replica that is. The record's revision is the session's epoch: status
// writes check it, so a replica that lost a node (the agent moved to another replica) cannot
// overwrite the newer session's status.
//
// A node that reconnects replaces its old stream, here or on another replica: the replica
// that sees its session taken over ends its own stream.

import { admitNodeLabels, labelsForPool, PermissionDeniedError, PreconditionFailedError, RateLimitedError, StoreUnavailableError, type Labels, type NodeStatus } from '../../machineconfig/index.ts';
import type { ServerMessage } from '../../runtime/generated/mcplane/v1/ServerMessage.ts';
import type { Logger } from '../../runtime/logger.ts';
import { certificateBinding, generationOf, issuerAmong, trustedCas, type CertificateBinding, type TrustedCa } from '../../runtime/pki.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import { NodeHistoryWriter } from './node-history-writer.ts';
import { NodeStatusWriter } from './node-status-writer.ts';
import { RateLimiter, type RateLimit } from '../../runtime/rate-limiter.ts';
import type { PreEncoded } from '../../runtime/pre-encoded.ts';
import type { Replica } from '../replica/replica.ts';
import { GroupCommit } from '../store/group-commit.ts';
import type { WriteOp } from '../store/store.ts';
import type { AgentSessionRecord, NodeRecordValue } from '../store/stored-records.ts';

export interface AgentStream {
  /** A message, or one encoded once for many streams (an assignment: see assignment-dispatcher). */
  write(message: ServerMessage | PreEncoded): boolean;
  /** Ends the stream: normally, or with the error the agent is told (a revoked certificate). */
  end(error?: Error): void;
}

export interface LocalSession {
  node: string;
  stream: AgentStream;
  /** The session record's resourceVersion when this replica wrote it. */
  epoch: string;
  /** What was last sent, so an unchanged assignment is not sent twice. */
  lastAssignment?: string;
  /** The agent's latest report: the cache may not show it yet when the stream ends. */
  lastStatus: NodeStatus;
  /** The certificate the stream was opened with (TLS only): what keeps the stream open. */
  certificate?: SessionCredential;
  /** A newer stream of the same node is registering here: this one ends when it has. */
  superseded?: boolean;
}

/**
 * What a stream's certificate must go on satisfying for the stream to stay open, checked when
 * it opens and again whenever any of it changes, on every replica: not revoked (sha256), of
 * the node name's current generation, not expired (notAfter: the session's deadline), and issued
 * by a CA the replica still trusts (issuer, the CA's fingerprint).
 */
export interface SessionCredential {
  sha256: string;
  serial: string;
  generation: number;
  notAfter: number;
  /** The issuing CA's fingerprint; absent when the replica was given no trust bundle to check. */
  issuer?: string;
}

/** The longest a deadline timer is set for: Node's timers overflow past 2^31 - 1 ms (24.8 days). */
const MAX_TIMER_MS = 3_600_000;

/**
 * Signs node certificates at renewal: a replica that holds the CA key (--ca-key, or ca.key in
 * --pki-dir). Others answer renewals with an error and the agent asks again later or elsewhere.
 */
export interface NodeCertificateSigner {
  sign(csrPem: string, node: string, pool: string, generation: number): Promise<string>;
  /** Every CA this server trusts now: the agent's trust bundle from the renewal on. */
  bundle(): string;
}

export interface SessionOpening {
  nodeName: string;
  /** What the agent reports; admitted under the node's binding (admitNodeLabels). */
  labels: Labels;
  /** The pool the node's credential binds it to; absent: the agent's labels are trusted (plaintext). */
  boundPool?: string;
  /** The client certificate the stream was opened with; absent in plaintext mode. */
  certificate?: CertificateBinding;
  /** The same certificate's DER: which CA issued it. */
  certificateDer?: Buffer;
  bootId: string;
  status: NodeStatus;
}

/**
 * Registrations per node per replica. Each costs a store commit, so a reconnect storm from one
 * certificate (2,000 streams in 15 s were seen) must cost a bounded number of writes; an agent
 * that moves after a failover registers once.
 */
export const REGISTRATION_RATE: RateLimit = { burst: 20, perMinute: 60 };

/** Registration batches committed at once (GroupCommit's maxInFlight). */
const REGISTRATION_COMMITS_IN_FLIGHT = 4;

/** Renewals per node per replica: each signs and commits, and an agent renews at 2/3 of a life. */
export const RENEWAL_RATE: RateLimit = { burst: 10, perMinute: 30 };

export class AgentSessions {
  readonly #local = new Map<string, LocalSession>();
  readonly #registrations = new RateLimiter(REGISTRATION_RATE);
  readonly #renewals = new RateLimiter(RENEWAL_RATE);
  /** Set by the server when this replica can sign (it holds the CA key). */
  signer: NodeCertificateSigner | undefined;
  /** The CAs this replica's TLS trusts now (trust()); undefined: not checked (plaintext, tests). */
  #trusted: { cas: readonly TrustedCa[]; fingerprints: ReadonlySet<string> } | undefined;
  /** Ends the streams whose certificate expired (armed for the earliest one). */
  #deadline: { at: number; timer: NodeJS.Timeout } | undefined;
  readonly writer: NodeStatusWriter;
  /** Finished updates into each node's NodeHistory, fenced like the status. */
  readonly history: NodeHistoryWriter;

  /** Registrations that arrive together (agents of a replica that died) commit together. */
  readonly #registrationCommits: GroupCommit;

  private readonly cache: ClusterCache;
  private readonly replica: Replica;
  private readonly log: Logger;
  constructor(cache: ClusterCache, replica: Replica, log: Logger) {
    this.cache = cache;
    this.replica = replica;
    this.log = log;
    this.#registrationCommits = new GroupCommit(cache.store, undefined, REGISTRATION_COMMITS_IN_FLIGHT);
    this.writer = new NodeStatusWriter(cache, log, (node, epoch) => this.#sessionLost(node, epoch));
    this.history = new NodeHistoryWriter(cache, log);
    cache.on('change', (change) => this.#onChange(change));
    replica.on('lost', () => this.closeAll());
  }

  get size(): number {
    return this.#local.size;
  }

  get(node: string): LocalSession | undefined {
    return this.#local.get(node);
  }

  local(): IterableIterator<LocalSession> {
    return this.#local.values();
  }

  /**
   * Records the node (identity, status, a session on this replica's lease) in one commit and
   * takes over its stream. Resolves once the cache shows the session.
   */
  async open(opening: SessionOpening, stream: AgentStream): Promise<LocalSession> {
    const lease = this.replica.lease;
    if (!lease) throw new StoreUnavailableError(`replica ${this.replica.name} has lost its store lease and cannot hold agent streams now; connect to another replica`);
    const { nodeName: name } = opening;
    const wait = this.#registrations.take(name);
    if (wait > 0) throw new RateLimitedError(`node ${name} registered too often (${REGISTRATION_RATE.burst} at once, then ${REGISTRATION_RATE.perMinute} a minute, on each replica)`, wait);
    const now = Date.now();
    const record = this.cache.nodeRecords.get(name);
    const ops: WriteOp[] = [];
    let credential: SessionCredential | undefined;
    if (opening.certificate) {
      credential = this.#credential(name, opening.certificate, opening.certificateDer);
      this.#refuseCertificate(name, opening.certificate, record?.value);
      // The checks make a revocation committed meanwhile, on any replica, win over this session.
      ops.push(...this.#revocationChecks(name, opening.certificate));
    }
    const value = this.#admit(opening, record?.value);
    if (!record || JSON.stringify(value) !== JSON.stringify(record.value)) {
      if (value.ignoredLabels && JSON.stringify(value.ignoredLabels) !== JSON.stringify(record?.value.ignoredLabels)) {
        this.log.warn({ node: name, boundPool: opening.boundPool, ignored: value.ignoredLabels }, 'labels the agent reported were not admitted');
      }
      ops.push({ type: 'put', kind: 'Node', name, value, ...(record ? { createdAt: record.createdAt, expectedVersion: record.resourceVersion } : { expectedVersion: null }) });
    } else {
      // Unchanged, but the binding it was checked against must still hold when this commits.
      ops.push({ type: 'check', kind: 'Node', name, expectedVersion: record.resourceVersion });
    }
    ops.push(this.writer.opening(name, opening.status, now));
    const session: AgentSessionRecord = { replica: this.replica.name, since: now, bootId: opening.bootId };
    ops.push({ type: 'put', kind: 'AgentSession', name, value: session, lease: lease.id });
    // A stream of the same node opened here with a renewed certificate takes over from the one
    // it renewed on: that one ends normally below, not as "bound to another certificate".
    const replaced = this.#local.get(name);
    if (replaced && replaced.stream !== stream) replaced.superseded = true;
    let committed: Awaited<ReturnType<typeof this.cache.store.commit>>;
    try {
      committed = await this.#registrationCommits.commit(ops);
    } catch (err) {
      if (replaced) delete replaced.superseded;
      throw err;
    }
    const { objects, revision } = committed;
    // The commit may have carried other nodes' registrations too (see GroupCommit).
    const epoch = objects.find((o) => o.kind === 'AgentSession' && o.name === name)!.resourceVersion;
    await this.cache.waitForRevision(revision);

    const previous = this.#local.get(name);
    if (previous && previous.stream !== stream) {
      this.log.info({ node: name }, 'node reconnected; closing its previous stream');
      previous.stream.end();
    }
    const local: LocalSession = { node: name, stream, epoch, lastStatus: opening.status, ...(credential ? { certificate: credential } : {}) };
    this.#local.set(name, local);
    if (credential) this.#armDeadline(credential.notAfter);
    // An update that finished while the agent was away (or before a crash here) is stored now.
    this.history.offer(name, epoch, opening.status.lastUpdate);
    return local;
  }

  /**
   * NodeRestriction for mcplane: role labels come from the credential's pool, and after its
   * first registration a node's labels are the operators' (mcctl label node), not its agent's.
   */
  #admit(opening: SessionOpening, existing: NodeRecordValue | undefined): NodeRecordValue {
    if (opening.boundPool === undefined) return { ...existing, labels: opening.labels, registered: true };
    const bound = labelsForPool(this.cache.pools.get(opening.boundPool)?.value, opening.boundPool);
    const settled = existing && existing.registered !== false ? existing.labels : undefined;
    const { labels, ignored, fromAgent } = admitNodeLabels({ reported: opening.labels, bound: existing?.labels ?? bound, ...(settled ? { existing: settled } : {}) });
    const value: NodeRecordValue = { ...existing, labels, registered: true };
    if (Object.keys(ignored).length) value.ignoredLabels = ignored;
    else delete value.ignoredLabels;
    if (!settled) {
      if (Object.keys(fromAgent).length) value.reportedLabels = fromAgent;
      else delete value.reportedLabels;
    }
    // A record without a binding (enrolled by an older server, or a certificate from `mcctl pki
    // node`) takes the first certificate that registers; from then on only that one.
    if (opening.certificate && !value.certificate) value.certificate = opening.certificate;
    // The agent uses its renewed certificate: the one it renewed from is no longer accepted.
    if (opening.certificate && value.previousCertificate && (value.certificate?.sha256 === opening.certificate.sha256 || value.previousCertificate.notAfter < Date.now())) delete value.previousCertificate;
    return value;
  }

  /**
   * Refuses a revoked or expired certificate, one of an older generation than the node name's
   * (a revoke or delete raised it: every certificate issued before is out, renewals included),
   * or one other than the certificate the node is bound to.
   */
  #refuseCertificate(name: string, presented: CertificateBinding, existing: NodeRecordValue | undefined): void {
    const stale = this.#staleGeneration(name, presented);
    if (stale) throw new PermissionDeniedError(`${stale}; the host must enroll again`);
    if (presented.notAfter <= Date.now()) throw new PermissionDeniedError(`the certificate for node ${name} (serial ${presented.serial}) expired at ${new Date(presented.notAfter).toISOString()}`);
    const revoked = this.cache.revokedCertificates.get(presented.sha256);
    if (revoked) {
      throw new PermissionDeniedError(`the certificate for node ${name} (serial ${presented.serial}) was ${revoked.value.reason === 'deleted' ? 'revoked when the node was deleted' : 'revoked'} at ${new Date(revoked.value.revokedAt).toISOString()} by ${revoked.value.revokedBy}; the host must enroll again`);
    }
    const bound = existing?.certificate;
    if (bound && bound.sha256 !== presented.sha256 && existing?.previousCertificate?.sha256 !== presented.sha256) {
      this.log.warn({ node: name, presented: presented.serial, bound: bound.serial }, 'node presented a certificate other than the one it is bound to');
      throw new PermissionDeniedError(`Node/${name} is bound to another certificate (serial ${bound.serial}, expires ${new Date(bound.notAfter).toISOString()}); this one (serial ${presented.serial}) is refused. A re-installed host: mcctl delete node ${name}, then enroll it again`);
    }
  }

  /** Why a certificate's generation is too old for the node name now; '' when it is current. */
  #staleGeneration(name: string, certificate: Pick<CertificateBinding, 'serial' | 'generation'>): string {
    const current = this.cache.nodeGenerations.get(name);
    const generation = generationOf(certificate);
    if (!current || generation >= current.value.generation) return '';
    const { value } = current;
    return `the certificate for node ${name} (serial ${certificate.serial}) is of generation ${generation}; every certificate of node ${name} before generation ${value.generation} was ${value.reason === 'deleted' ? 'revoked when the node was deleted' : 'revoked'} at ${new Date(value.raisedAt).toISOString()} by ${value.raisedBy}`;
  }

  /** The store checks a registration or renewal commits with: not revoked, generation unchanged. */
  #revocationChecks(name: string, presented: CertificateBinding): WriteOp[] {
    const generation = this.cache.nodeGenerations.get(name);
    return [
      { type: 'check', kind: 'RevokedCertificate', name: presented.sha256, expectedVersion: null },
      { type: 'check', kind: 'NodeGeneration', name, expectedVersion: generation?.resourceVersion ?? null },
    ];
  }

  /** What a stream's certificate is held to while it is open (see SessionCredential). */
  #credential(name: string, certificate: CertificateBinding, der: Buffer | undefined): SessionCredential {
    const credential: SessionCredential = { sha256: certificate.sha256, serial: certificate.serial, generation: generationOf(certificate), notAfter: certificate.notAfter };
    if (this.#trusted && der) {
      const issuer = issuerAmong(der, this.#trusted.cas);
      // TLS checked the chain against the bundle of its handshake; a reload since may have
      // retired that CA.
      if (!issuer) throw new PermissionDeniedError(`the certificate for node ${name} (serial ${certificate.serial}) was issued by a CA this server no longer trusts; the host must enroll again`);
      credential.issuer = issuer;
    }
    return credential;
  }

  /**
   * The CAs this replica trusts from now on (its TLS material, read at start and at each
   * reload). A stream whose certificate's CA left the bundle ends at once, as a handshake with it
   * would now fail: a CA retired because its key leaked cuts off what it signed.
   */
  trust(bundlePem: string): void {
    const cas = trustedCas(bundlePem);
    this.#trusted = { cas, fingerprints: new Set(cas.map((ca) => ca.fingerprint)) };
    for (const local of [...this.#local.values()]) {
      const issuer = local.certificate?.issuer;
      if (issuer === undefined || this.#trusted.fingerprints.has(issuer)) continue;
      this.#endForCause(local, `the CA that issued the certificate of node ${local.node} (serial ${local.certificate!.serial}) is no longer trusted`);
    }
  }

  /** Sets the deadline timer for `at` if nothing earlier is armed. */
  #armDeadline(at: number): void {
    if (this.#deadline && this.#deadline.at <= at) return;
    if (this.#deadline) clearTimeout(this.#deadline.timer);
    const timer = setTimeout(() => {
      this.#deadline = undefined;
      this.#endExpired();
    }, Math.min(MAX_TIMER_MS, Math.max(0, at - Date.now())));
    timer.unref();
    this.#deadline = { at, timer };
  }

  /** Ends the streams whose certificate expired; re-arms for the next one. */
  #endExpired(): void {
    const now = Date.now();
    let next = Infinity;
    for (const local of [...this.#local.values()]) {
      const notAfter = local.certificate?.notAfter;
      if (notAfter === undefined) continue;
      if (notAfter <= now) this.#endForCause(local, `the certificate of node ${local.node} (serial ${local.certificate!.serial}) expired at ${new Date(notAfter).toISOString()}`);
      else next = Math.min(next, notAfter);
    }
    if (next !== Infinity) this.#armDeadline(next);
  }

  /**
   * Signs a new certificate for the node this stream is registered as, for the key in `csrPem`,
   * with the same subject (node and pool), and binds the node to it in one commit. The one the
   * stream was opened with stays accepted until the agent registers with the new one, so the
   * agent switches streams without a gap. Returns the certificate and the trust bundle.
   */
  async renew(node: string, stream: AgentStream, presented: CertificateBinding, pool: string, csrPem: string): Promise<{ certificatePem: string; caBundlePem: string }> {
    const local = this.#local.get(node);
    if (!local || local.stream !== stream) throw new PreconditionFailedError(`node ${node}: renew on a registered stream (register first)`);
    if (!this.signer) {
      throw new PreconditionFailedError(`replica ${this.replica.name} holds no CA key and cannot sign certificates (give it --ca-key, or ca.key in --pki-dir); ask another replica or again later`);
    }
    const wait = this.#renewals.take(node);
    if (wait > 0) throw new RateLimitedError(`node ${node} renewed its certificate too often (${RENEWAL_RATE.burst} at once, then ${RENEWAL_RATE.perMinute} a minute, on each replica)`, wait);
    const record = this.cache.nodeRecords.get(node);
    if (!record) throw new PermissionDeniedError(`Node/${node} was deleted; the host must enroll again`);
    this.#refuseCertificate(node, presented, record.value);
    if (local.certificate?.issuer && this.#trusted && !this.#trusted.fingerprints.has(local.certificate.issuer)) {
      throw new PermissionDeniedError(`the CA that issued the certificate of node ${node} (serial ${presented.serial}) is no longer trusted; the host must enroll again`);
    }
    const checks = this.#revocationChecks(node, presented);
    const certificatePem = await this.signer.sign(csrPem, node, pool, this.cache.nodeGeneration(node));
    const issued = certificateBinding(certificatePem);
    // The certificate this stream was opened with becomes the previous one: a renewal the agent
    // never stored (its answer was lost) leaves nothing behind that could connect.
    const value: NodeRecordValue = { ...record.value, certificate: issued, previousCertificate: presented };
    const { revision } = await this.cache.store.commit([
      { type: 'put', kind: 'Node', name: node, value, createdAt: record.createdAt, expectedVersion: record.resourceVersion },
      ...checks,
    ]);
    await this.cache.waitForRevision(revision);
    this.log.info({ node, serial: issued.serial, notAfter: new Date(issued.notAfter).toISOString(), previous: presented.serial }, 'node certificate renewed');
    return { certificatePem, caBundlePem: this.signer.bundle() };
  }

  /** The agent sent a status report: stored with the next batch, if the session still holds. */
  report(node: string, status: NodeStatus): void {
    const local = this.#local.get(node);
    if (!local) return;
    local.lastStatus = status;
    this.writer.enqueue(node, local.epoch, status);
    this.history.offer(node, local.epoch, status.lastUpdate);
  }

  /** The stream ended. Removes the session record unless a newer session replaced it. */
  async close(node: string, stream: AgentStream): Promise<boolean> {
    const local = this.#local.get(node);
    if (!local || local.stream !== stream) return false;
    this.#local.delete(node);
    await this.#endSession(local);
    return true;
  }

  /**
   * Ends a stream whose credential no longer holds (revoked, deleted, expired, its CA retired),
   * telling the agent why, and its session with it: the node is shown disconnected and the
   * rollout stops counting it as reachable at once, not when this replica's lease ends.
   */
  #endForCause(local: LocalSession, why: string): void {
    if (this.#local.get(local.node) !== local) return;
    this.log.warn({ node: local.node }, `${why}; ending its stream`);
    this.#local.delete(local.node);
    local.stream.end(new PermissionDeniedError(`${why}; the host must enroll again`));
    // A deleted node's records went with it: a status written now would bring one back.
    if (this.cache.nodeRecords.has(local.node)) void this.#endSession(local);
  }

  /** Removes a session record this replica wrote, with the session's last report as the status. */
  #endSession(local: LocalSession): Promise<void> {
    return this.writer.ending(local.node, local.epoch, local.lastStatus);
  }

  send(node: string, message: ServerMessage): boolean {
    const local = this.#local.get(node);
    if (!local) return false;
    local.stream.write(message);
    return true;
  }

  /** Ends every stream (shutdown, or the replica lost its lease): agents reconnect elsewhere. */
  closeAll(): void {
    for (const s of this.#local.values()) s.stream.end();
    this.#local.clear();
  }

  #onChange(change: CacheChange): void {
    if (change.resync || change.changed.has('Node') || change.changed.has('RevokedCertificate') || change.changed.has('NodeGeneration')) this.#endRevoked(change);
    const names = change.resync ? [...this.#local.keys()] : [...(change.changed.get('AgentSession') ?? [])];
    for (const node of names) {
      const local = this.#local.get(node);
      // Taken over by this node's newer stream here (a renewed certificate): open() ends it.
      if (!local || local.superseded) continue;
      const record = this.cache.sessions.get(node);
      if (record?.resourceVersion === local.epoch) continue;
      // Only a newer session replaces a record, and only this replica deletes its own (after
      // forgetting the stream): anything else means the node is no longer ours.
      if (record && Number(record.resourceVersion) < Number(local.epoch)) continue;
      this.#sessionLost(node, local.epoch);
    }
  }

  /**
   * Ends, at once, the streams of nodes deleted or revoked on any replica: a credential taken
   * away must not keep an open stream (and with it the node's configs and secrets).
   */
  #endRevoked(change: CacheChange): void {
    const names = change.resync || change.changed.has('RevokedCertificate')
      ? [...this.#local.keys()]
      : [...new Set([...(change.changed.get('Node') ?? []), ...(change.changed.get('NodeGeneration') ?? [])])];
    for (const node of names) {
      const local = this.#local.get(node);
      if (!local) continue;
      const record = this.cache.nodeRecords.get(node);
      const held = local.certificate;
      let why: string | undefined;
      if (!record) why = `Node/${node} was deleted`;
      else if (held && this.cache.revokedCertificates.has(held.sha256)) why = `the certificate of node ${node} was revoked`;
      else if (held && this.#staleGeneration(node, held)) why = this.#staleGeneration(node, held);
      else if (held && record.value.certificate && record.value.certificate.sha256 !== held.sha256 && record.value.previousCertificate?.sha256 !== held.sha256 && !local.superseded) why = `Node/${node} is bound to another certificate now`;
      if (why) this.#endForCause(local, why);
    }
  }

  #sessionLost(node: string, epoch: string): void {
    const local = this.#local.get(node);
    if (!local || local.epoch !== epoch) return;
    const holder = this.cache.sessions.get(node)?.value.replica;
    this.log.info({ node, now: holder ?? 'nobody' }, 'node\'s session moved away from this replica; ending its stream here');
    this.#local.delete(node);
    local.stream.end();
  }
}
