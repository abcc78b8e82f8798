// GroupCommit (src/controlplane/store/group-commit.ts) on a real SQLite store: commits that
// arrive while one is in flight go together, within the store's limits and never touching one
// object twice, and a stale version fails only its own writer.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
import { ConflictError } from '../../src/machineconfig/index.ts';
import { GroupCommit } from '../../src/controlplane/store/group-commit.ts';
import { SqliteStore } from '../../src/controlplane/store/sqlite-store.ts';
import type { CommitResult, WriteOp } from '../../src/controlplane/store/store.ts';

let dir: string;
let store: SqliteStore;
/** Every commit the store was asked for, by number of ops. */
let commits: number[];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mcplane-group-commit-'));
  store = new SqliteStore(dir);
  commits = [];
  const commit = store.commit.bind(store);
  store.commit = (ops: WriteOp[]) => {
    commits.push(ops.length);
    return commit(ops);
  };
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const registration = (node: string): WriteOp[] => [
  { type: 'put', kind: 'NodeStatus', name: node, value: { lastSeen: 1 } },
  { type: 'put', kind: 'AgentSession', name: node, value: { replica: 'r' } },
];

test('commits that arrive together go in few transactions, each caller seeing its own objects', async () => {
  const group = new GroupCommit(store);
  const results = await Promise.all(Array.from({ length: 100 }, (_, i) => group.commit(registration(`node-${i}`))));
  // The first goes alone at once; the other 99 (198 writes) wait for it and then fill two
  // transactions of at most 128 writes.
  assert.deepEqual(commits, [2, 128, 70]);
  for (const [i, r] of results.entries()) {
    assert.ok(r.objects.some((o) => o.kind === 'AgentSession' && o.name === `node-${i}`), `node-${i}'s session is in its result`);
  }
  const listed = await store.list(['AgentSession']);
  assert.equal(listed.items.length, 100);
});

test('two commits touching one object never share a transaction', async () => {
  const group = new GroupCommit(store);
  await Promise.all([group.commit(registration('a')), group.commit(registration('b')), group.commit(registration('b')), group.commit(registration('c'))]);
  // a alone; then b and c together; the second b after them.
  assert.deepEqual(commits, [2, 4, 2]);
});

test('a stale version fails its own writer only; the others commit', async () => {
  const group = new GroupCommit(store);
  const { objects } = await group.commit([{ type: 'put', kind: 'Node', name: 'n', value: { labels: {} } }]);
  const version = objects[0]!.resourceVersion;
  await group.commit([{ type: 'put', kind: 'Node', name: 'n', value: { labels: { x: '1' } }, expectedVersion: version }]);
  commits = [];
  const outcomes = await Promise.allSettled([
    group.commit(registration('first')),
    group.commit(registration('ok-1')),
    group.commit([{ type: 'check', kind: 'Node', name: 'n', expectedVersion: version }, ...registration('stale')]),
    group.commit(registration('ok-2')),
  ]);
  assert.equal(outcomes[0]!.status, 'fulfilled');
  assert.equal(outcomes[1]!.status, 'fulfilled');
  assert.equal(outcomes[3]!.status, 'fulfilled');
  assert.equal(outcomes[2]!.status, 'rejected');
  assert.ok((outcomes[2] as PromiseRejectedResult).reason instanceof ConflictError);
  // The writers that went together were refused as one transaction, then each went alone.
  const grouped = commits.findIndex((n) => n > 3);
  assert.ok(grouped >= 0, `some writers went together: ${commits}`);
  const together = commits[grouped]!;
  assert.deepEqual(commits.slice(grouped + 1).reduce((a, b) => a + b, 0), together, `each went again alone after the refused batch: ${commits}`);
  const sessions = (await store.list(['AgentSession'])).items.map((o) => o.name).sort();
  assert.deepEqual(sessions, ['first', 'ok-1', 'ok-2']);
});

test('a store failure fails every writer of the batch with it', async () => {
  const group = new GroupCommit({
    commit: async (): Promise<CommitResult> => {
      throw new Error('store unavailable');
    },
  });
  const outcomes = await Promise.allSettled([group.commit(registration('a')), group.commit(registration('b'))]);
  assert.deepEqual(outcomes.map((o) => o.status), ['rejected', 'rejected']);
});

test('with room for several batches in flight, each goes at once; one touching an object in flight waits for that batch', async () => {
  // The store holds every commit until the test lets it go, as a slow etcd would.
  const held: { ops: WriteOp[]; release: () => void }[] = [];
  const slow: Pick<SqliteStore, 'commit'> = {
    commit: (ops) => new Promise<void>((release) => held.push({ ops, release })).then(() => store.commit(ops)),
  };
  const group = new GroupCommit(slow, undefined, 2);
  const a = group.commit(registration('a'));
  const b = group.commit(registration('b'));
  const aAgain = group.commit(registration('a'));
  const c = group.commit(registration('c'));
  // a and b went at once, each alone; the second a and c wait for room.
  assert.deepEqual(held.map((h) => h.ops[0]!.name), ['a', 'b']);
  held[1]!.release();
  await b;
  await new Promise((r) => setImmediate(r));
  // Room for one: c goes; the second a still waits for the first a's batch.
  assert.deepEqual(held.map((h) => h.ops[0]!.name), ['a', 'b', 'c']);
  held[0]!.release();
  await a;
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(held.map((h) => h.ops[0]!.name), ['a', 'b', 'c', 'a']);
  held[2]!.release();
  held[3]!.release();
  await Promise.all([aAgain, c]);
  assert.deepEqual((await store.list(['AgentSession'])).items.map((o) => o.name).sort(), ['a', 'b', 'c']);
});
