// etcd's default request limits, checked before a commit leaves the process so both backends
// refuse the same commits with the same message, and the caller learns which limit it broke
// (etcd itself answers only "too many operations in txn request").

import { StoreLimitError } from '../../machineconfig/index.ts';
import { putJson, STORE_LIMITS, type WriteOp } from './store.ts';

/** Bytes etcd counts for an op: the key and the serialized value, near enough. */
export function opBytes(op: WriteOp): number {
  const key = op.kind.length + op.name.length + 16;
  return op.type === 'put' ? key + Buffer.byteLength(putJson(op)) + 32 : key;
}

export function checkCommitLimits(ops: readonly WriteOp[]): void {
  checkOneWritePerObject(ops);
  const writes = ops.filter((o) => o.type !== 'check').length;
  const checks = ops.filter((o) => o.type === 'check' || o.expectedVersion !== undefined).length;
  const { maxOpsPerCommit, maxRequestBytes } = STORE_LIMITS;
  if (writes > maxOpsPerCommit || checks > maxOpsPerCommit) {
    throw new StoreLimitError(`a commit may hold at most ${maxOpsPerCommit} writes and ${maxOpsPerCommit} version checks (etcd's --max-txn-ops); this one has ${writes} writes and ${checks} checks: split it`);
  }
  let bytes = 0;
  for (const op of ops) bytes += opBytes(op);
  if (bytes > maxRequestBytes) {
    const largest = ops.reduce((a, b) => (opBytes(b) > opBytes(a) ? b : a));
    throw new StoreLimitError(`a commit may be at most ${maxRequestBytes} bytes (etcd's --max-request-bytes); this one is ${bytes} bytes, the largest object ${largest.kind}/${largest.name} ${opBytes(largest)} bytes`);
  }
}

/** Splits ops into commits that each stay within the limits (for independent writes only). */
export function splitIntoCommits(ops: readonly WriteOp[], maxOps = 100): WriteOp[][] {
  const batches: WriteOp[][] = [];
  let current: WriteOp[] = [];
  let bytes = 0;
  const budget = STORE_LIMITS.maxRequestBytes * 0.9;
  for (const op of ops) {
    const size = opBytes(op);
    if (current.length && (current.length >= maxOps || bytes + size > budget)) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(op);
    bytes += size;
  }
  if (current.length) batches.push(current);
  return batches;
}

/**
 * One write per object per commit: etcd refuses a transaction that writes one key twice, and
 * checks every version against the state before the commit, so "delete X then create X" has no
 * meaning there. Both backends refuse it.
 */
function checkOneWritePerObject(ops: readonly WriteOp[]): void {
  const seen = new Set<string>();
  for (const op of ops) {
    if (op.type === 'check') continue;
    const id = `${op.kind}/${op.name}`;
    if (seen.has(id)) throw new StoreLimitError(`${id}: a commit may write an object once; this one writes it twice (etcd refuses duplicate keys in a transaction)`);
    seen.add(id);
  }
}
