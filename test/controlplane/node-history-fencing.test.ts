// NodeHistory has one writer: the replica holding the node's stream, fenced by its session epoch.
// A real SQLite store and the replica's real cache; the writer is given the epochs two replicas
// would hold (the old session's and the one that replaced it).

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startUpdate, type UpdateRecord } from '../../src/machineconfig/index.ts';
import { ClusterCache } from '../../src/controlplane/cache/cluster-cache.ts';
import { NodeHistoryWriter } from '../../src/controlplane/sessions/node-history-writer.ts';
import { SqliteStore } from '../../src/controlplane/store/sqlite-store.ts';
import type { NodeHistoryRecord } from '../../src/controlplane/store/stored-records.ts';
import { createLogger } from '../../src/runtime/logger.ts';

const log = createLogger({ level: 'silent' });
const done = (id: string, at: number): UpdateRecord => ({ ...startUpdate(id, 'rendered-a', 'rendered-b', at), endedUnixMs: at + 1, result: 'Done' });

test('a replica whose session was replaced cannot write the history; the holder writes each update once, the last 20 kept', async () => {
  const store = new SqliteStore(mkdtempSync(join(tmpdir(), 'mcplane-history-')));
  const cache = await ClusterCache.start(store, log);
  try {
    const session = async () => {
      const { objects, revision } = await store.commit([{ type: 'put', kind: 'AgentSession', name: 'n1', value: { replica: 'r', since: Date.now(), bootId: 'b' } }]);
      await cache.waitForRevision(revision);
      return objects[0]!.resourceVersion;
    };
    const stale = await session();
    const current = await session();
    const writer = new NodeHistoryWriter(cache, log);
    const read = async () => (await store.get('NodeHistory', 'n1'))?.value.updates ?? [];

    writer.offer('n1', stale, done('u-stale', 1));
    await writer.idle();
    assert.deepEqual(await read(), [], 'the old session\'s replica wrote nothing');

    writer.offer('n1', current, done('u1', 10));
    writer.offer('n1', current, done('u1', 10));
    writer.offer('n1', current, { ...startUpdate('u-running', 'a', 'b', 20) });
    await writer.idle();
    assert.deepEqual((await read()).map((u) => u.id), ['u1'], 'once, and never a running update');

    // A drain the leader ran joins the record (the seam for the drain branch).
    writer.controlPlanePhases = (_node, r) => (r.id === 'u2' ? [{ name: 'drain', startedUnixMs: 15, endedUnixMs: 19, source: 'control-plane' }] : []);
    writer.offer('n1', current, { ...done('u2', 20), phases: [{ name: 'check', startedUnixMs: 20, endedUnixMs: 21, source: 'agent' }] });
    await writer.idle();
    assert.deepEqual((await read()).at(-1)!.phases.map((p) => p.name), ['drain', 'check']);

    for (let i = 3; i <= 30; i++) writer.offer('n1', current, done(`u${i}`, i * 10));
    await writer.idle();
    const kept = await read();
    assert.equal(kept.length, 20);
    assert.equal(kept[0]!.id, 'u11');
    assert.equal(kept.at(-1)!.id, 'u30');
  } finally {
    cache.stop();
    await store.close();
  }
});
