// The agent streams this replica holds, and their session records in the store. A session
// record lives on the replica's lease, so "connected" means a replica that is alive holds the
// stream, whichever replica that is. The record's revision is the session's epoch: status
// writes check it, so a replica that lost a node (the agent moved to another replica) cannot
// overwrite the newer session's status.
//
// A node that reconnects replaces its old stream, here or on another replica: the replica
// that sees its session taken over ends its own stream.

import { admitNodeLabels, ConflictError, labelsForPool, PermissionDeniedError, PreconditionFailedError, RateLimitedError, StoreUnavailableError, type Labels, type NodeStatus } from '../../machineconfig/index.ts';
import type { ServerMessage } from '../../runtime/generated/mcplane/v1/ServerMessage.ts';
import type { Logger } from '../../runtime/logger.ts';
import { certificateBinding, type CertificateBinding } from '../../runtime/pki.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import { NodeHistoryWriter } from './node-history-writer.ts';
import { NodeStatusWriter } from './node-status-writer.ts';
import { RateLimiter, type RateLimit } from '../../runtime/rate-limiter.ts';
import type { PreEncoded } from '../../runtime/pre-encoded.ts';
import type { Replica } from '../replica/replica.ts';
import { GroupCommit } from '../store/group-commit.ts';
import type { WriteOp } from '../store/store.ts';
import type { AgentSessionRecord, NodeRecordValue, NodeStatusRecord } from '../store/stored-records.ts';

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
  /** The SHA-256 fingerprint of the certificate the stream was opened with (TLS only). */
  certificate?: string;
  /** A newer stream of the same node is registering here: this one ends when it has. */
  superseded?: boolean;
}

/**
 * Signs node certificates at renewal: a replica that holds the CA key (--ca-key, or ca.key in
 * --pki-dir). Others answer renewals with an error and the agent asks again later or elsewhere.
 */
export interface NodeCertificateSigner {
  sign(csrPem: string, node: string, pool: string): Promise<string>;
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
  readonly writer: NodeStatusWriter;
  /** Finished updates into each node's NodeHistory, fenced like the status. */
  readonly history: NodeHistoryWriter;

  /** Registrations that arrive together (agents of a replica that died) commit together. */
  readonly #registrationCommits: GroupCommit;

  constructor(private readonly cache: ClusterCache, private readonly replica: Replica, private readonly log: Logger) {
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
    if (opening.certificate) {
      this.#refuseCertificate(name, opening.certificate, record?.value);
      // The check makes a revocation committed meanwhile, on any replica, win over this session.
      ops.push({ type: 'check', kind: 'RevokedCertificate', name: opening.certificate.sha256, expectedVersion: null });
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
    const status = this.cache.nodeStatuses.get(name);
    ops.push({ type: 'put', kind: 'NodeStatus', name, value: { status: opening.status, lastSeen: now } satisfies NodeStatusRecord, ...(status ? { createdAt: status.createdAt } : {}) });
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
    const local: LocalSession = { node: name, stream, epoch, lastStatus: opening.status, ...(opening.certificate ? { certificate: opening.certificate.sha256 } : {}) };
    this.#local.set(name, local);
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

  /** Refuses a revoked certificate, or one other than the certificate the node is bound to. */
  #refuseCertificate(name: string, presented: CertificateBinding, existing: NodeRecordValue | undefined): void {
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
    const certificatePem = await this.signer.sign(csrPem, node, pool);
    const issued = certificateBinding(certificatePem);
    // The certificate this stream was opened with becomes the previous one: a renewal the agent
    // never stored (its answer was lost) leaves nothing behind that could connect.
    const value: NodeRecordValue = { ...record.value, certificate: issued, previousCertificate: presented };
    const { revision } = await this.cache.store.commit([
      { type: 'put', kind: 'Node', name: node, value, createdAt: record.createdAt, expectedVersion: record.resourceVersion },
      { type: 'check', kind: 'RevokedCertificate', name: presented.sha256, expectedVersion: null },
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
    await this.writer.flush();
    // The session ends, and "last seen" becomes the moment it did (a connected node's agent
    // sends heartbeats, which are not written: the open session is what says it is there). The
    // status is the session's own last report: the flushed write may not be in the cache yet,
    // and the cached one would write an older report back over it.
    const stored = this.cache.nodeStatuses.get(node);
    await this.cache.store.commit([
      { type: 'delete', kind: 'AgentSession', name: node, expectedVersion: local.epoch },
      { type: 'put', kind: 'NodeStatus', name: node, value: { status: local.lastStatus, lastSeen: Date.now() } satisfies NodeStatusRecord, ...(stored ? { createdAt: stored.createdAt } : {}) },
    ])
      .catch((err: unknown) => {
        if (!(err instanceof ConflictError)) this.log.warn({ err, node }, 'could not remove the session record; it ends with this replica\'s lease');
      });
    return true;
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
    if (change.resync || change.changed.has('Node') || change.changed.has('RevokedCertificate')) this.#endRevoked(change);
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
    const names = change.resync || change.changed.has('RevokedCertificate') ? [...this.#local.keys()] : [...(change.changed.get('Node') ?? [])];
    for (const node of names) {
      const local = this.#local.get(node);
      if (!local) continue;
      const record = this.cache.nodeRecords.get(node);
      let why: string | undefined;
      if (!record) why = `Node/${node} was deleted`;
      else if (local.certificate && this.cache.revokedCertificates.has(local.certificate)) why = `the certificate of node ${node} was revoked`;
      else if (local.certificate && record.value.certificate && record.value.certificate.sha256 !== local.certificate && record.value.previousCertificate?.sha256 !== local.certificate && !local.superseded) why = `Node/${node} is bound to another certificate now`;
      if (!why) continue;
      this.log.warn({ node }, `${why}; ending its stream`);
      this.#local.delete(node);
      local.stream.end(new PermissionDeniedError(`${why}; the host must enroll again`));
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
