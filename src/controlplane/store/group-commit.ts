// Group commit for independent writers. When a replica dies, its agents register again on the
// others all at once (1,667 each in the 5,000-agent bench), and each registration is one small
// transaction: on etcd each waits for its own round trip and raft entry. Here the commits that
// arrive while one is in flight wait for it and then go together, as one transaction, within
// the store's limits. Their writers stay independent: a batch refused for one writer's stale
// version is retried writer by writer, so only that writer sees the ConflictError.
// Nothing waits on a timer: a commit that finds room in flight goes at once.

import { ConflictError, StoreLimitError } from '../../machineconfig/index.ts';
import { STORE_LIMITS, type CommitResult, type Store, type WriteOp } from './store.ts';

interface Waiting {
  ops: WriteOp[];
  resolve(result: CommitResult): void;
  reject(err: unknown): void;
}

const objectKey = (op: WriteOp): string => `${op.kind}/${op.name}`;

export class GroupCommit {
  #waiting: Waiting[] = [];
  #inFlight = 0;
  /**
   * Objects the batches in flight touch: a commit touching one waits for them. A key is in one
   * batch in flight at most (#takeBatch keeps the others waiting).
   */
  readonly #keysInFlight = new Set<string>();

  private readonly store: Pick<Store, 'commit'>;
  private readonly maxOps: number;
  /**
   * Batches committed at once. One keeps the batches largest; a few more keep a store whose
   * round trips are long (etcd under load) busy, as the registrations were before they were
   * grouped: each batch then waits for a round trip, not for every batch before it.
   */
  private readonly maxInFlight: number;
  constructor(
    store: Pick<Store, 'commit'>,
    maxOps: number = STORE_LIMITS.maxOpsPerCommit,
    maxInFlight: number = 1,
  ) {
    this.store = store;
    this.maxOps = maxOps;
    this.maxInFlight = maxInFlight;
  }

  /** Commits `ops` all or nothing, possibly in one transaction with other callers' ops. */
  commit(ops: WriteOp[]): Promise<CommitResult> {
    return new Promise<CommitResult>((resolve, reject) => {
      this.#waiting.push({ ops, resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.maxInFlight && this.#waiting.length) {
      const batch = this.#takeBatch();
      if (batch.length === 0) return; // each waits for an object in flight
      const keys = batch.flatMap((w) => w.ops.map(objectKey));
      for (const k of keys) this.#keysInFlight.add(k);
      this.#inFlight++;
      void this.#commitBatch(batch).finally(() => {
        this.#inFlight--;
        for (const k of keys) this.#keysInFlight.delete(k);
        this.#pump();
      });
    }
  }

  /**
   * The oldest waiting commits that fit in one transaction: within the op limit (writes and
   * checks each), and never two that touch the same object (etcd refuses a key written twice in
   * a transaction, and a check beside a write of the same key would test the batch's own write),
   * nor one touching an object a batch in flight touches (it goes after that batch, in order).
   */
  #takeBatch(): Waiting[] {
    const batch: Waiting[] = [];
    const rest: Waiting[] = [];
    const touched = new Set<string>();
    let writes = 0;
    let checks = 0;
    for (const w of this.#waiting) {
      const w1 = w.ops.filter((o) => o.type !== 'check').length;
      const c1 = w.ops.length - w1;
      const keys = w.ops.map(objectKey);
      const fits = !keys.some((k) => this.#keysInFlight.has(k)) &&
        (batch.length === 0 || (writes + w1 <= this.maxOps && checks + c1 <= this.maxOps && !keys.some((k) => touched.has(k))));
      if (!fits) {
        rest.push(w);
        continue;
      }
      batch.push(w);
      writes += w1;
      checks += c1;
      for (const k of keys) touched.add(k);
    }
    this.#waiting = rest;
    return batch;
  }

  async #commitBatch(batch: Waiting[]): Promise<void> {
    if (batch.length === 1) {
      const [w] = batch as [Waiting];
      await this.store.commit(w.ops).then(w.resolve, w.reject);
      return;
    }
    try {
      const result = await this.store.commit(batch.flatMap((w) => w.ops));
      for (const w of batch) w.resolve(result);
    } catch (err) {
      if (!(err instanceof ConflictError || err instanceof StoreLimitError)) {
        for (const w of batch) w.reject(err);
        return;
      }
      // One writer's version did not hold (or together they were too large for one request):
      // each goes again alone, and only its own fails.
      for (const w of batch) await this.store.commit(w.ops).then(w.resolve, w.reject);
    }
  }
}
