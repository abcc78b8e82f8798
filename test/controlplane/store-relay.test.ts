// The store relayed over a real MessageChannel (store-relay.ts, relayed-store.ts) from a real
// SQLite store: what the status thread's cache is built on.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import { test } from 'node:test';
import { StoreUnavailableError } from '../../src/machineconfig/index.ts';
import { RelayedStore } from '../../src/controlplane/store/relayed-store.ts';
import { relayStore } from '../../src/controlplane/store/store-relay.ts';
import { SqliteStore } from '../../src/controlplane/store/sqlite-store.ts';
import type { ChangeEvent } from '../../src/controlplane/store/store.ts';
import { eventually } from '../helpers/simulated-agent.ts';

async function relayed() {
  const dir = mkdtempSync(join(tmpdir(), 'relay-'));
  const store = new SqliteStore(dir);
  const { port1, port2 } = new MessageChannel();
  const errors: unknown[] = [];
  const relay = relayStore(store, ['MachineConfigPool', 'Event'], port1, (err) => errors.push(err));
  const far = new RelayedStore(store.backend, port2);
  return {
    store, far, errors, port1,
    async close() {
      relay.stop();
      await far.close();
      port1.close();
      port2.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

test('list, then a watch from its revision: every later commit of the relayed kinds, in order, none twice', async () => {
  const r = await relayed();
  try {
    await r.store.commit([{ type: 'put', kind: 'MachineConfigPool', name: 'worker', value: { v: 1 } }, { type: 'put', kind: 'Node', name: 'n1', value: {} }]);
    const listed = await r.far.list(['MachineConfigPool', 'Event']);
    assert.deepEqual(listed.items.map((o) => `${o.kind}/${o.name}`), ['MachineConfigPool/worker'], 'only the kinds asked for');
    // Commits between the list and the watch are held for the watch, not lost.
    await r.store.commit([{ type: 'put', kind: 'MachineConfigPool', name: 'worker', value: { v: 2 } }]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const seen: { revision: number; events: ChangeEvent[] }[] = [];
    r.far.watch(listed.revision, { onEvents: (events, revision) => seen.push({ revision, events }), onCompacted: () => assert.fail('not compacted') });
    await r.store.commit([{ type: 'put', kind: 'Node', name: 'n2', value: {} }]); // not relayed
    await r.store.commit([{ type: 'delete', kind: 'MachineConfigPool', name: 'worker' }]);
    await eventually(() => seen.length === 2, 5000, 'two relayed revisions');
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(seen.length, 2, 'and nothing after them: none twice');
    assert.deepEqual(seen.map((b) => b.events.map((e) => `${e.type} ${e.object.kind}/${e.object.name}`)), [['put MachineConfigPool/worker'], ['delete MachineConfigPool/worker']]);
    assert.ok(seen[0]!.revision > listed.revision && seen[1]!.revision > seen[0]!.revision);
    assert.deepEqual(seen[0]!.events[0]!.object.value, { v: 2 });
  } finally {
    await r.close();
  }
});

test('get reads the real store; a missing object is undefined; writes are refused, naming why', async () => {
  const r = await relayed();
  try {
    await r.store.commit([{ type: 'put', kind: 'NodeHistory', name: 'n1', value: { updates: [1] } }]);
    assert.deepEqual((await r.far.get('NodeHistory', 'n1'))?.value, { updates: [1] });
    assert.equal(await r.far.get('NodeHistory', 'ghost'), undefined);
    await assert.rejects(r.far.commit(), (err: Error) => err instanceof StoreUnavailableError && /read-only relay/.test(err.message));
    await assert.rejects(r.far.grantLease(), StoreUnavailableError);
    assert.deepEqual(r.errors, []);
  } finally {
    await r.close();
  }
});

// The relay posts 'compacted' when its watch on the real store is compacted away (etcd's, when it
// falls behind; SQLite's running watches never are): posted here on the relay's port as it would.
test('a compaction message ends the watch (onCompacted), before or after the watch started, and a new list picks up', async () => {
  const r = await relayed();
  try {
    const first = await r.far.list();
    const compactions: number[] = [];
    r.far.watch(first.revision, { onEvents: () => undefined, onCompacted: (rev) => compactions.push(rev) });
    // What the relay posts when the real watch is compacted (etcd's, when it falls behind).
    r.port1.postMessage({ t: 'compacted', compacted: 7 });
    await eventually(() => compactions.length === 1, 5000, 'onCompacted');
    assert.deepEqual(compactions, [7]);
    await r.store.commit([{ type: 'put', kind: 'MachineConfigPool', name: 'infra', value: {} }]);
    const again = await r.far.list();
    assert.deepEqual(again.items.map((o) => o.name), ['infra']);
    // Compacted between a list and the watch that follows it: the watch is told at once.
    r.port1.postMessage({ t: 'compacted', compacted: 9 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    r.far.watch(again.revision, { onEvents: () => assert.fail('no events after a compaction'), onCompacted: (rev) => compactions.push(rev) });
    await eventually(() => compactions.length === 2, 5000, 'onCompacted for the early compaction');
    assert.deepEqual(compactions, [7, 9]);
  } finally {
    await r.close();
  }
});

test('a list the real store cannot answer is an error on the far side, not a wait forever', async () => {
  const r = await relayed();
  try {
    await r.store.close();
    await assert.rejects(r.far.list(), (err: Error) => err instanceof StoreUnavailableError && /listing the store failed/.test(err.message));
    assert.equal(r.errors.length, 1);
  } finally {
    await r.close().catch(() => undefined);
  }
});
