// The manager gives each controller a lane of its own, fed by a real cache over a real SQLite
// store: a controller stuck in a reconcile holds up no other controller; leadership starts the
// leader-only lanes with every key queued and losing it aborts the reconciles in flight; a burst
// of changes to one key is one reconcile; settle() waits for queued work but not for a backoff.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClusterCache, type CacheChange } from '../../../src/controlplane/cache/cluster-cache.ts';
import { ControllerManager } from '../../../src/controlplane/controllers/controller-manager.ts';
import type { KeyedController } from '../../../src/controlplane/controllers/reconciler.ts';
import { SqliteStore } from '../../../src/controlplane/store/sqlite-store.ts';
import { createLogger } from '../../../src/runtime/logger.ts';
import { mcDoc, parseValid } from '../../helpers/manifests.ts';
import { until } from '../../helpers/until.ts';

const log = createLogger({ level: 'silent' });
const config = (name: string) => parseValid(mcDoc(name, 'worker', { kernelArguments: [`${name}=1`] })).configs[0]!;

let stops: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const stop of stops.reverse()) await stop();
  stops = [];
});

async function startCache(): Promise<ClusterCache> {
  const store = new SqliteStore(mkdtempSync(join(tmpdir(), 'mcplane-manager-')));
  const cache = await ClusterCache.start(store, log);
  stops.push(() => {
    cache.stop();
    return store.close();
  });
  return cache;
}

async function put(cache: ClusterCache, name: string): Promise<void> {
  const { revision } = await cache.store.commit([{ type: 'put', kind: 'MachineConfig', name, value: config(name) }]);
  await cache.waitForRevision(revision);
}

/** A controller keyed by MachineConfig name that records what it reconciled. */
function recorder(name: string, reconcile: (key: string, signal: AbortSignal) => Promise<void> = async () => {}): KeyedController<string> & { seen: string[] } {
  const seen: string[] = [];
  return {
    name,
    leaderOnly: true,
    concurrency: 2,
    seen,
    keysFor: (change: CacheChange) => (change.resync ? [] : [...(change.changed.get('MachineConfig') ?? [])]),
    reconcile: async (key, signal) => {
      seen.push(key);
      await reconcile(key, signal);
    },
  };
}

test('a controller stuck in a reconcile holds up no other controller, and leadership lost aborts it', async () => {
  const cache = await startCache();
  let aborted: unknown;
  const stuck = recorder('stuck', (_key, signal) => new Promise((_resolve, reject) => {
    signal.addEventListener('abort', () => reject(aborted = signal.reason), { once: true });
  }));
  const quick = recorder('quick');
  const manager = new ControllerManager([stuck, quick], cache, log);
  stops.push(() => manager.stop());

  await put(cache, '10-before-leading');
  await sleep(50);
  assert.deepEqual([stuck.seen, quick.seen], [[], []], 'leader-only controllers do nothing before leading');

  manager.setLeading(true);
  await put(cache, '20-a');
  await until(() => quick.seen.includes('20-a') && stuck.seen.includes('20-a'), 'both controllers to take 20-a');
  await put(cache, '30-b');
  await until(() => quick.seen.includes('30-b'), 'quick to go on while stuck is stuck');
  assert.deepEqual(quick.seen, ['20-a', '30-b']);

  manager.setLeading(false);
  await until(() => aborted !== undefined, 'the stuck reconcile to see the abort');
  assert.match(String((aborted as Error).message), /stopped leading/);
  await put(cache, '40-while-following');
  await sleep(50);
  assert.ok(!quick.seen.includes('40-while-following'), 'nothing runs while following');
});

test('a burst of changes to one key becomes one or two reconciles, not one each', async () => {
  const cache = await startCache();
  const c = recorder('burst');
  const manager = new ControllerManager([c], cache, log);
  stops.push(() => manager.stop());
  manager.setLeading(true);
  await Promise.all(Array.from({ length: 30 }, () => cache.store.commit([{ type: 'put', kind: 'MachineConfig', name: '50-hot', value: config('50-hot') }])));
  await manager.settle();
  const runs = c.seen.filter((k) => k === '50-hot').length;
  assert.ok(runs >= 1 && runs <= 3, `30 writes to one key coalesced into ${runs} reconciles`);
});

test('settle() waits for queued and running keys, not for a failing key\'s backoff', async () => {
  const cache = await startCache();
  let slowDone = false;
  const slow = recorder('slow', async (key) => {
    if (key === '60-fails') throw new Error('always fails');
    await sleep(150);
    slowDone = true;
  });
  const manager = new ControllerManager([slow], cache, log);
  stops.push(() => manager.stop());
  manager.setLeading(true);
  await put(cache, '60-fails');
  await put(cache, '70-slow');
  const started = Date.now();
  await manager.settle();
  assert.ok(slowDone, 'settle returned before the slow reconcile finished');
  assert.ok(Date.now() - started < 5000, 'settle waited out the failing key');
});

test('pacedByCost: under a stream of changes, a costly controller\'s keys gather for twice its last reconcile', async () => {
  const cache = await startCache();
  // Twins fed the same changes, each reconcile taking 40 ms (a pass over a large pool).
  const costly = (key: string, signal: AbortSignal) => sleep(40, undefined, { signal }).then(() => undefined, () => undefined);
  const plain = recorder('plain', costly);
  const paced = Object.assign(recorder('paced', costly), { pacedByCost: true });
  const manager = new ControllerManager([plain, paced], cache, log);
  stops.push(() => manager.stop());
  manager.setLeading(true);
  const end = Date.now() + 1500;
  while (Date.now() < end) {
    await cache.store.commit([{ type: 'put', kind: 'MachineConfig', name: '50-hot', value: config('50-hot') }]);
    await sleep(5);
  }
  await manager.settle();
  // Unpaced: a reconcile every ~60 ms (40 + 20 gathering); paced: every ~120 ms (40 + 80).
  assert.ok(paced.seen.length >= 3, `the paced controller still ran: ${paced.seen.length} reconciles`);
  assert.ok(paced.seen.length <= 0.75 * plain.seen.length, `paced ${paced.seen.length} reconciles against ${plain.seen.length} unpaced`);
});

test('minIntervalMs: the first change after a quiet spell goes at once; one within the interval waits for it, even though the lane is quiet', async () => {
  const cache = await startCache();
  // A reconcile that returns at once: the lane is quiet again before the next change comes, which
  // is how the status writer's batches found the rollout and pool-status lanes.
  const c = Object.assign(recorder('interval'), { minIntervalMs: 60_000 });
  const manager = new ControllerManager([c], cache, log);
  stops.push(() => manager.stop());
  manager.setLeading(true);
  await put(cache, '10-first');
  await until(() => c.seen.includes('10-first'), 'the first change to be reconciled at once');
  await put(cache, '20-within-the-interval');
  await sleep(300);
  assert.deepEqual(c.seen, ['10-first'], 'a change within the interval waits for it');
  // settle() hands out what is gathering (start-up and tests do not wait out the interval).
  await manager.settle();
  assert.deepEqual(c.seen, ['10-first', '20-within-the-interval']);
});

test('minIntervalMs: a stream of changes, each finding the lane quiet, is one reconcile per interval', async () => {
  const cache = await startCache();
  const plain = recorder('plain');
  const spaced = Object.assign(recorder('spaced'), { minIntervalMs: 200 });
  const manager = new ControllerManager([plain, spaced], cache, log);
  stops.push(() => manager.stop());
  manager.setLeading(true);
  const started = Date.now();
  while (Date.now() - started < 1000) {
    await put(cache, '50-hot');
    await sleep(10);
  }
  const elapsed = Date.now() - started;
  await manager.settle();
  // One at once, then one per 200 ms of the stream, and the last gathered one settle() handed out.
  assert.ok(spaced.seen.length <= Math.ceil(elapsed / 200) + 2, `${spaced.seen.length} reconciles in ${elapsed} ms against ${plain.seen.length} without the interval`);
  assert.ok(spaced.seen.length >= 2, `the spaced controller still ran: ${spaced.seen.length}`);
});
