// The etcd backend of the store contract (store.ts), for several mcplane-server replicas.
//
// It talks to etcd's own v3 gRPC API with @grpc/grpc-js, over trimmed copies of etcd's protos in
// proto/etcd/, and not through an npm etcd client: that keeps one copy of proto-loader in the
// program and gives full control over what matters here: a deadline on every call, moving to the
// next member on UNAVAILABLE, resuming watches from a revision, and treating compaction as the
// contract says. There is no consensus of our own: etcd's Raft is the only one.
//
// etcd's model is the contract's model: one store revision that every write bumps, mod_revision
// as resourceVersion, Txn compares for compare-and-swap, watches from a revision, leases.
// What etcd lacks is a creation time: it is kept in a JSON envelope beside the value
// (etcd-codec.ts).

import type { ServiceError } from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import { ConfigurationError, ConflictError, StoreLimitError, StoreUnavailableError } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import { isLoopbackHost } from '../../runtime/tls.ts';
import { encodeEnvelope, decodeEnvelope, EtcdKeys, nextKey } from './etcd-codec.ts';
import { describeGrpcError, EtcdConnection, type EtcdTls } from './etcd-connection.ts';
import { EtcdLease } from './etcd-lease.ts';
import { EtcdLeaseThread } from './etcd-lease-thread.ts';
import type { Compare, KeyValue, LeaseGrantResponse, RangeResponse, RequestOp, StatusResponse, TxnResponse } from './etcd-proto.ts';
import { EtcdWatch } from './etcd-watch.ts';
import { checkCommitLimits } from './store-limits.ts';
import { putJson, STORE_LIMITS, type CommitResult, type Lease, type ListResult, type PutOp, type Store, type StoredKind, type StoredObject, type WatchHandlers, type WriteOp } from './store.ts';
import type { StoredValue } from './stored-records.ts';

export interface EtcdStoreOptions {
  /** Client endpoints of the etcd members, host:port. */
  endpoints: string[];
  /** Key namespace; every key is `${prefix}${kind}/${name}`. Must end with "/". */
  prefix?: string;
  /** TLS to etcd (its --trusted-ca-file side); plaintext when absent. */
  tls?: EtcdTls;
  /**
   * Plaintext to an endpoint other than loopback. Refused without it: etcd holds every
   * MachineConfig and the leader lease, and plaintext lets anyone on the path read and write them.
   */
  allowPlaintext?: boolean;
  log: Logger;
  /** The deadline of every call, over all the members it tries. */
  deadlineMs?: number;
}

export const DEFAULT_ETCD_PREFIX = '/mcplane/';
export const DEFAULT_ETCD_DEADLINE_MS = 5_000;

/** Keys per list page: with small objects a page is a few hundred KiB. */
const PAGE_KEYS = 500;
/** Commits retried when an object was re-created between reading its createdAt and writing it. */
const CREATED_AT_RETRIES = 5;

interface Current {
  /** etcd's create_revision: it changes only when the object is deleted and created again. */
  createRevision: string;
  modRevision?: string;
  createdAt?: number;
}

export class EtcdStore implements Store {
  readonly backend = 'etcd' as const;
  readonly keys: EtcdKeys;
  #connection: EtcdConnection;
  #log: Logger;
  #watches = new Set<EtcdWatch>();
  #leases = new Set<EtcdLease>();
  /** Renews the leases (etcd-lease-thread.ts); started with the store, again for a new lease if it ended. */
  #leaseThread: Promise<EtcdLeaseThread> | undefined;
  readonly #tls: EtcdTls | undefined;

  private constructor(connection: EtcdConnection, keys: EtcdKeys, tls: EtcdTls | undefined, log: Logger) {
    this.#connection = connection;
    this.keys = keys;
    this.#tls = tls;
    this.#log = log;
  }

  /** Connects and checks that a member answers (Maintenance.Status), so a bad endpoint fails here. */
  static async connect(options: EtcdStoreOptions): Promise<EtcdStore> {
    const prefix = options.prefix ?? DEFAULT_ETCD_PREFIX;
    if (!options.endpoints.length) throw new ConfigurationError('etcd store: endpoints: at least one host:port is needed');
    for (const ep of options.endpoints) {
      if (!/^[^\s/:]+:\d+$/.test(ep) && !/^\[[0-9a-fA-F:]+\]:\d+$/.test(ep)) {
        throw new ConfigurationError(`etcd store: endpoints: "${ep}" is not host:port`);
      }
    }
    if (!prefix.endsWith('/') || prefix.length < 2) {
      throw new ConfigurationError(`etcd store: prefix: "${prefix}" must be a non-empty key prefix ending with "/" (so that it cannot overlap another prefix)`);
    }
    if (!options.tls) checkPlaintext(options.endpoints, options.allowPlaintext === true, options.log);
    const connection = new EtcdConnection(options.endpoints, options.tls, options.deadlineMs ?? DEFAULT_ETCD_DEADLINE_MS);
    try {
      const res = await connection.unary<StatusResponse>('Maintenance', 'Status', {}, 'Status');
      options.log.info({ endpoints: options.endpoints, prefix, etcdVersion: res.version }, 'connected to etcd');
    } catch (err) {
      connection.close();
      throw mapError(err, 'Status');
    }
    const store = new EtcdStore(connection, new EtcdKeys(prefix), options.tls, options.log);
    // Started now, so that granting a lease never waits for a thread to boot (with tsx, from
    // source, that takes longer than a call's deadline on a loaded machine).
    void store.#runningLeaseThread().catch(() => { /* told again by grantLease */ });
    return store;
  }

  async get<K extends StoredKind>(kind: K, name: string): Promise<StoredObject<StoredValue<K>> | undefined> {
    const what = `Range ${kind}/${name}`;
    try {
      const res = await this.#connection.unary<RangeResponse>('KV', 'Range', { key: this.keys.key(kind, name) }, what);
      const kv = res.kvs[0];
      return kv ? this.keys.toObject<StoredValue<K>>(kv) : undefined;
    } catch (err) {
      throw mapError(err, what);
    }
  }

  async list(kinds?: readonly StoredKind[]): Promise<ListResult> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#listOnce(kinds);
      } catch (err) {
        // The revision of the first page was compacted while paging: list again at a newer one.
        if ((err as ServiceError).code === status.OUT_OF_RANGE && attempt < 3) continue;
        throw mapError(err, 'Range (list)');
      }
    }
  }

  async #listOnce(kinds?: readonly StoredKind[]): Promise<ListResult> {
    const ranges = kinds ? kinds.map((k) => this.keys.kindRange(k)) : [{ key: this.keys.prefixKey, range_end: this.keys.prefixEnd }];
    const items: StoredObject[] = [];
    let revision = 0;
    let limit = PAGE_KEYS;
    for (const range of ranges) {
      let key = range.key;
      for (;;) {
        let res: RangeResponse;
        try {
          res = await this.#connection.unary<RangeResponse>('KV', 'Range', { key, range_end: range.range_end, limit, revision: String(revision) }, 'Range (list)');
        } catch (err) {
          // A page over gRPC's 4 MiB receive limit (a few large rendered configs): smaller pages.
          // One object always fits, since etcd takes no request over 1.5 MiB.
          const details = (err as ServiceError).details ?? '';
          if ((err as ServiceError).code === status.RESOURCE_EXHAUSTED && /larger than max/.test(details) && limit > 1) {
            limit = await this.#pageLimitUnder(details, { key, range_end: range.range_end, limit, revision: String(revision) });
            this.#log.debug({ limit }, 'etcd list page over the receive limit; smaller pages');
            continue;
          }
          throw err;
        }
        // Every page after the first is read at the first page's revision: one snapshot.
        if (revision === 0) revision = Number(res.header.revision);
        for (const kv of res.kvs) {
          const object = this.keys.toObject(kv);
          if (object) items.push(object);
        }
        const last = res.kvs.at(-1);
        if (!res.more || !last) break;
        key = nextKey(last.key);
      }
    }
    if (revision === 0) {
      const res = await this.#connection.unary<RangeResponse>('KV', 'Range', { key: this.keys.prefixKey, range_end: this.keys.prefixEnd, count_only: true }, 'Range (revision)');
      revision = Number(res.header.revision);
    }
    return { items, revision };
  }

  /**
   * A page limit whose response fits: grpc-js says how large the refused one was, and a
   * keys-only read of the same page says how many keys it held. Halving instead would fetch
   * the oversized page again and again.
   */
  async #pageLimitUnder(details: string, page: { key: Buffer; range_end: Buffer; limit: number; revision: string }): Promise<number> {
    const sizes = /\((\d+) vs\.? ?(\d+)\)/.exec(details);
    if (!sizes) return Math.max(1, Math.floor(page.limit / 2));
    const keys = await this.#connection.unary<RangeResponse>('KV', 'Range', { ...page, keys_only: true }, 'Range (list page size)');
    const perKey = Number(sizes[1]) / Math.max(1, keys.kvs.length);
    return Math.max(1, Math.min(Math.floor(page.limit / 2), Math.floor((Number(sizes[2]) * 0.8) / perKey)));
  }

  /**
   * One Txn. Like any etcd client, a Txn sent again on another member after a timeout may have
   * been applied the first time: a conditional commit then fails its compare on its own write
   * (a ConflictError the caller resolves by reading again, as for any conflict); an
   * unconditional one is written twice with the same content.
   */
  async commit(ops: WriteOp[]): Promise<CommitResult> {
    checkCommitLimits(ops);
    for (const op of ops) {
      if (op.type === 'put' && op.lease !== undefined && !/^\d+$/.test(op.lease)) {
        throw new StoreLimitError(`${op.kind}/${op.name}: lease ${op.lease} does not exist (an etcd lease id is a number)`);
      }
    }
    try {
      return await this.#commit(ops);
    } catch (err) {
      if ((err as ServiceError).code === status.NOT_FOUND && /lease/i.test((err as ServiceError).details ?? '')) {
        const leased = ops.filter((o): o is PutOp => o.type === 'put' && o.lease !== undefined);
        throw new StoreLimitError(`${leased.map((o) => `${o.kind}/${o.name}: lease ${o.lease}`).join(', ')}: the lease does not exist (revoked, expired or never granted)`);
      }
      throw mapError(err, 'Txn (commit)');
    }
  }

  async #commit(ops: WriteOp[]): Promise<CommitResult> {
    // A put without createdAt keeps the existing object's: read them first. A put with an
    // expectedVersion is then safe already (if the object changed since, its compare fails); a
    // put without one gets a guard compare on the create_revision read, which only a delete and
    // re-create in between changes (other writers' updates do not, so concurrent plain puts never
    // fail); then the commit reads again and retries. A create (expectedVersion null) needs no
    // read: its compare already says the object is new.
    const needCreatedAt = ops.filter((o): o is PutOp => o.type === 'put' && o.createdAt === undefined && o.expectedVersion !== null);
    const userChecks = ops.filter((o) => o.expectedVersion !== undefined);
    let guarded = needCreatedAt.filter((o) => o.expectedVersion === undefined);
    // etcd takes at most 128 compares (--max-txn-ops). Past that the guards are left out: a put
    // then keeps the createdAt read just before, even if the object was re-created in between.
    if (userChecks.length + guarded.length > STORE_LIMITS.maxOpsPerCommit) guarded = [];
    for (let attempt = 0; ; attempt++) {
      const current = needCreatedAt.length ? await this.#readCurrent(needCreatedAt) : new Map<string, Current>();
      const now = Date.now();
      const compare: Compare[] = [];
      const success: RequestOp[] = [];
      const createdAts: number[] = [];
      for (const op of ops) {
        const key = this.keys.key(op.kind, op.name);
        if (op.expectedVersion !== undefined) compare.push(versionCompare(key, op.expectedVersion));
        if (op.type === 'put') {
          const createdAt = op.createdAt ?? current.get(key.toString())?.createdAt ?? now;
          createdAts.push(createdAt);
          success.push({ request_put: { key, value: encodeEnvelope(putJson(op), createdAt), lease: op.lease ?? '0' } });
        } else if (op.type === 'delete') {
          success.push({ request_delete_range: { key } });
        }
      }
      for (const op of guarded) {
        const key = this.keys.key(op.kind, op.name);
        compare.push({ result: 'EQUAL', target: 'CREATE', key, create_revision: current.get(key.toString())?.createRevision ?? '0' });
      }
      // When a compare fails, the failure branch reads the caller's checked objects at that same
      // revision: the ConflictError names the real culprit without another round trip.
      const checkedKeys = new Map(userChecks.map((o) => { const k = this.keys.key(o.kind, o.name); return [k.toString(), k] as const; }));
      const failure: RequestOp[] = [...checkedKeys.values()].map((key) => ({ request_range: { key } }));
      const res = await this.#connection.unary<TxnResponse>('KV', 'Txn', { compare, success, failure }, 'Txn (commit)');
      const revision = Number(res.header.revision);
      if (res.succeeded) {
        const puts = ops.filter((o): o is PutOp => o.type === 'put');
        const objects = puts.map((op, i) => {
          const object: StoredObject = { kind: op.kind, name: op.name, value: op.value, resourceVersion: String(revision), createdAt: createdAts[i]! };
          if (op.lease !== undefined) object.lease = op.lease;
          return object;
        });
        return { revision, objects };
      }
      const found = new Map<string, KeyValue>();
      for (const r of res.responses) for (const kv of r.response_range?.kvs ?? []) found.set(kv.key.toString(), kv);
      for (const op of userChecks) {
        const kv = found.get(this.keys.key(op.kind, op.name).toString());
        const actual = kv ? String(kv.mod_revision) : null;
        if (actual !== op.expectedVersion) throw new ConflictError(op.kind, op.name, op.expectedVersion ?? '<absent>', actual ?? '<absent>');
      }
      // Only a guard failed: one of these objects was deleted or created since it was read.
      // Read again and retry; objects re-created over and over are a conflict in the end.
      if (attempt >= CREATED_AT_RETRIES) {
        const op = guarded[0]!;
        const latest = await this.get(op.kind, op.name);
        throw new ConflictError(op.kind, op.name, current.get(this.keys.key(op.kind, op.name).toString())?.modRevision ?? '<absent>', latest?.resourceVersion ?? '<absent>');
      }
    }
  }

  /** The current version and createdAt of these objects, read in one Txn (one revision). */
  async #readCurrent(ops: PutOp[]): Promise<Map<string, Current>> {
    const keys = [...new Map(ops.map((o) => { const k = this.keys.key(o.kind, o.name); return [k.toString(), k] as const; })).values()];
    const res = await this.#connection.unary<TxnResponse>('KV', 'Txn', { compare: [], success: keys.map((key) => ({ request_range: { key } })), failure: [] }, 'Txn (read before commit)');
    const current = new Map<string, Current>();
    for (const key of keys) current.set(key.toString(), { createRevision: '0' });
    for (const r of res.responses) {
      for (const kv of r.response_range?.kvs ?? []) {
        current.set(kv.key.toString(), { createRevision: String(kv.create_revision), modRevision: String(kv.mod_revision), createdAt: decodeEnvelope(kv.value).createdAt });
      }
    }
    return current;
  }

  watch(afterRevision: number, handlers: WatchHandlers): () => void {
    const watch = new EtcdWatch(this.#connection, this.keys, afterRevision, handlers, this.#log, (w) => this.#watches.delete(w));
    this.#watches.add(watch);
    return () => watch.cancel();
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    if (!(ttlMs > 0)) throw new ConfigurationError(`lease TTL ${ttlMs} ms: must be a positive number of milliseconds`);
    // etcd counts whole seconds and raises a TTL to its minimum (1.5 election timeouts, rounded
    // up: 2 s with etcd's default flags); the lease keeps the TTL etcd granted. The thread that
    // will renew it is running first (started with the store), so its first renewal follows
    // the grant closely.
    const thread = await this.#runningLeaseThread();
    const sentAt = Date.now();
    let res: LeaseGrantResponse;
    try {
      res = await this.#connection.unary<LeaseGrantResponse>('Lease', 'LeaseGrant', { TTL: String(Math.max(1, Math.ceil(ttlMs / 1000))) }, 'LeaseGrant');
    } catch (err) {
      throw mapError(err, 'LeaseGrant');
    }
    if (res.error) throw new StoreUnavailableError(`etcd refused LeaseGrant: ${res.error}`);
    const lease = new EtcdLease(this.#connection, thread, String(res.ID), Number(res.TTL) * 1000, sentAt, this.#log, (l) => this.#leases.delete(l));
    this.#leases.add(lease);
    return lease;
  }

  async close(): Promise<void> {
    for (const w of [...this.#watches]) w.cancel();
    for (const l of [...this.#leases]) l.stop();
    const thread = this.#leaseThread;
    this.#leaseThread = undefined;
    await thread?.then((t) => t.close(), () => {});
    this.#connection.close();
  }

  async #runningLeaseThread(): Promise<EtcdLeaseThread> {
    const running = await this.#leaseThread?.catch(() => undefined);
    if (running?.running) return running;
    this.#leaseThread = EtcdLeaseThread.start({ endpoints: this.#connection.endpoints, tls: this.#tls, deadlineMs: this.#connection.deadlineMs, log: this.#log });
    return this.#leaseThread;
  }
}

function versionCompare(key: Buffer, expected: string | null): Compare {
  if (expected === null) return { result: 'EQUAL', target: 'CREATE', key, create_revision: '0' };
  // A resourceVersion that is not a revision can match nothing.
  return { result: 'EQUAL', target: 'MOD', key, mod_revision: /^\d+$/.test(expected) ? expected : '-1' };
}

/** etcd's answers as the contract's errors. */
/**
 * Plaintext etcd on loopback stays on this machine (tests, a single-host set-up): allowed, with
 * an info line. Anywhere else it needs the operator's explicit opt-in, and is logged at warn every
 * start so that it is not forgotten.
 */
function checkPlaintext(endpoints: string[], allowed: boolean, log: Logger): void {
  const remote = endpoints.filter((ep) => !isLoopbackHost(ep.slice(0, ep.lastIndexOf(':'))));
  if (remote.length === 0) {
    log.info({ endpoints }, 'etcd over plaintext on loopback (no --etcd-ca/--etcd-cert/--etcd-key)');
    return;
  }
  if (!allowed) {
    throw new ConfigurationError(`etcd store: plaintext (no --etcd-ca, --etcd-cert, --etcd-key) to ${remote.join(', ')}, which is not loopback: anyone on the network path could read and rewrite the cluster's configs and take the leader lease. Give etcd's CA and a client certificate (mcctl pki replica NAME), or --etcd-allow-plaintext (config key etcdAllowPlaintext: true) to use plaintext anyway`);
  }
  log.warn({ endpoints: remote }, 'etcd over plaintext off loopback (--etcd-allow-plaintext): replica traffic is neither authenticated nor encrypted');
}

function mapError(err: unknown, what: string): Error {
  if (err instanceof Error && 'code' in err && typeof (err as { code: unknown }).code === 'string') return err; // already ours
  const e = err as ServiceError;
  if (typeof e?.code === 'number') {
    const details = e.details || e.message;
    if (e.code === status.INVALID_ARGUMENT && /too many operations|too large|duplicate key/.test(details)) {
      return new StoreLimitError(`etcd refused ${what}: ${details}`);
    }
    if (e.code === status.RESOURCE_EXHAUSTED) return new StoreLimitError(`etcd ${what}: ${details}`);
    if (e.code === status.PERMISSION_DENIED) {
      // etcd's auth is on and the user it mapped this replica to (the CN of --etcd-cert) may not
      // use these keys: a set-up problem the operator has to see named, not a passing outage.
      return new StoreUnavailableError(`etcd ${what} failed: ${describeGrpcError(e)} (with etcd's auth on, the CN of this replica's --etcd-cert is its etcd user, which needs a role with readwrite on the key prefix)`, { cause: err });
    }
    return new StoreUnavailableError(`etcd ${what} failed: ${describeGrpcError(e)}`, { cause: err });
  }
  return err instanceof Error ? err : new StoreUnavailableError(`etcd ${what} failed: ${String(err)}`);
}
