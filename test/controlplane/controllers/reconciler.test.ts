// The keyed controller's workers: `concurrency` of them take keys at once, never the same key
// twice at once; a failing key backs off on its own and is forgotten once it succeeds; a slow key
// holds one worker and nothing else (the held drain, in miniature); and aborting the run reaches
// the reconciles in flight and leaves their keys queued for the next leader.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ExponentialBackoff, RateLimitedQueue } from '../../../src/controlplane/controllers/rate-limited-queue.ts';
import { enqueueChange, runController, type KeyedController } from '../../../src/controlplane/controllers/reconciler.ts';
import { createLogger } from '../../../src/runtime/logger.ts';
import { until } from '../../helpers/until.ts';

const log = createLogger({ level: 'silent' });

type Reconcile = KeyedController<string, string[]>['reconcile'];

function controller(reconcile: Reconcile, concurrency = 1): KeyedController<string, string[]> {
  return { name: 'test', leaderOnly: true, concurrency, keysFor: (keys) => keys, reconcile };
}

test('with 4 workers and keys re-added all the time, no key is ever reconciled twice at once, yet keys run in parallel', async () => {
  const keys = ['node-a', 'node-b', 'node-c', 'node-d', 'node-e', 'node-f'];
  const inFlight = new Map<string, number>();
  const maxPerKey = new Map<string, number>();
  const runs = new Map<string, number>();
  let total = 0;
  let maxTotal = 0;
  const q = new RateLimitedQueue<string>();
  const stop = new AbortController();
  const c = controller(async (key) => {
    const now = (inFlight.get(key) ?? 0) + 1;
    inFlight.set(key, now);
    maxPerKey.set(key, Math.max(maxPerKey.get(key) ?? 0, now));
    maxTotal = Math.max(maxTotal, ++total);
    // The key changes again while it is being reconciled: it must wait for this one to finish.
    q.add(key);
    await sleep(1 + Math.floor(Math.random() * 4));
    inFlight.set(key, inFlight.get(key)! - 1);
    total--;
    runs.set(key, (runs.get(key) ?? 0) + 1);
  }, 4);
  const run = runController(c, q, stop.signal, { log });
  const pump = setInterval(() => enqueueChange(c, q, keys, log), 1);
  await until(() => keys.every((k) => (runs.get(k) ?? 0) >= 15), 'every key reconciled 15 times');
  clearInterval(pump);
  stop.abort();
  await run;
  for (const k of keys) assert.equal(maxPerKey.get(k), 1, `${k} was reconciled ${maxPerKey.get(k)} times at once`);
  assert.equal(maxTotal, 4, 'four workers were busy at once');
});

test('a slow key holds one worker, not the controller: with a drain held on node-a, node-b is reconciled every time it changes', async () => {
  const q = new RateLimitedQueue<string>();
  const stop = new AbortController();
  let releaseHeld!: () => void;
  const held = new Promise<void>((resolve) => (releaseHeld = resolve));
  let heldRunning = false;
  const bRuns: boolean[] = [];
  const c = controller(async (key) => {
    if (key === 'node-a') {
      heldRunning = true;
      await held; // a PodDisruptionBudget refusing the eviction
      heldRunning = false;
      return;
    }
    bRuns.push(heldRunning);
  }, 2);
  const run = runController(c, q, stop.signal, { log });
  q.add('node-a');
  await until(() => heldRunning, 'the held drain to start');
  for (let i = 0; i < 5; i++) {
    q.add('node-b');
    await until(() => bRuns.length === i + 1, `node-b reconcile ${i + 1}`);
  }
  assert.deepEqual(bRuns, [true, true, true, true, true], 'every node-b reconcile ran while node-a was still held');
  releaseHeld();
  stop.abort();
  await run;
});

test('a failing key is retried with growing waits and forgotten once it succeeds; its backoff does not delay another key', async () => {
  const q = new RateLimitedQueue<string>({ rateLimiter: new ExponentialBackoff(4, 10_000) });
  const stop = new AbortController();
  const attempts: number[] = [];
  const others: string[] = [];
  const c = controller(async (key) => {
    if (key !== 'pool/broken') {
      others.push(key);
      return;
    }
    attempts.push(performance.now());
    if (attempts.length <= 4) throw new Error('the store refused');
  }, 1);
  const run = runController(c, q, stop.signal, { log });
  q.add('pool/broken');
  await until(() => attempts.length === 2, 'the first retry');
  // While pool/broken backs off, another pool is reconciled at once: one worker is enough.
  q.add('pool/fine');
  await until(() => others.length === 1, 'pool/fine');
  assert.ok(attempts.length < 5, 'pool/fine did not wait for the failing pool to finish backing off');
  await until(() => attempts.length === 5, 'the fifth attempt, which succeeds');
  await until(() => q.numRequeues('pool/broken') === 0, 'the key forgotten after success');
  const gaps = attempts.slice(1).map((t, i) => t - attempts[i]!);
  // Waits of 4, 8, 16, 32 ms: lower bounds (1 ms of timer rounding), and growing.
  [4, 8, 16, 32].forEach((want, i) => assert.ok(gaps[i]! >= want - 1, `wait ${i} was ${gaps[i]} ms, want >= ${want}`));
  assert.ok(gaps[3]! > gaps[0]!, `waits grew: ${gaps.map((g) => g.toFixed(1)).join(', ')}`);
  stop.abort();
  await run;
});

test('success forgets the backoff: a key failing again after a success starts from the base again', async () => {
  const q = new RateLimitedQueue<string>({ rateLimiter: new ExponentialBackoff(1, 10_000) });
  const stop = new AbortController();
  const outcomes = ['fail', 'fail', 'fail', 'ok', 'fail', 'ok'];
  /** Failures counted for the key as each attempt starts. */
  const countedAtStart: number[] = [];
  const c = controller(async (key) => {
    countedAtStart.push(q.numRequeues(key));
    if (outcomes[countedAtStart.length - 1] === 'fail') throw new Error('try again');
  });
  const run = runController(c, q, stop.signal, { log });
  q.add('k');
  await until(() => countedAtStart.length === 4, 'the success');
  q.add('k');
  await until(() => countedAtStart.length === 6, 'the failure after it and its retry');
  assert.deepEqual(countedAtStart, [0, 1, 2, 3, 0, 1], 'the count went back to 0 after the success, not on to 4');
  await until(() => q.numRequeues('k') === 0, 'the last success forgotten');
  stop.abort();
  await run;
});

test('requeueAfterMs runs the key again after that long, without counting a failure', async () => {
  const q = new RateLimitedQueue<string>();
  const stop = new AbortController();
  const times: number[] = [];
  const c = controller(async () => {
    times.push(performance.now());
    return times.length < 3 ? { requeueAfterMs: 20 } : undefined;
  });
  const run = runController(c, q, stop.signal, { log });
  q.add('pool/windowed');
  await until(() => times.length === 3, 'two requeues');
  assert.ok(times[1]! - times[0]! >= 19 && times[2]! - times[1]! >= 19);
  assert.equal(q.numRequeues('pool/windowed'), 0);
  await sleep(40);
  assert.equal(times.length, 3, 'no requeue asked, none made');
  stop.abort();
  await run;
});

test('aborting the run reaches the reconciles in flight; the run ends once they return, and their keys wait for the next leader', async () => {
  const q = new RateLimitedQueue<string>();
  const firstTerm = new AbortController();
  const started = new Set<string>();
  const sawAbort: string[] = [];
  const wrote: string[] = [];
  const c: KeyedController<string, string[]> = {
    ...controller(async (key, signal) => {
      started.add(key);
      // An eviction retried until the PDB allows it: the abort is what ends it.
      await sleep(60_000, undefined, { signal }).catch((err: unknown) => {
        sawAbort.push(key);
        throw err;
      });
      wrote.push(key);
    }, 3),
  };
  const run = runController(c, q, firstTerm.signal, { log });
  for (const k of ['node-1', 'node-2', 'node-3', 'node-4']) q.add(k);
  await until(() => started.size === 3, 'three drains in flight');
  const abortedAt = performance.now();
  firstTerm.abort();
  await run;
  assert.ok(performance.now() - abortedAt < 30_000, 'the run did not wait out the 60 s drains');
  assert.deepEqual(sawAbort.sort(), ['node-1', 'node-2', 'node-3']);
  assert.deepEqual(wrote, [], 'nothing the deposed leader started went on to write');
  assert.equal(q.numRequeues('node-1'), 0, 'cut short by the abort is not a failure: no backoff');
  assert.equal(q.len(), 4, 'the interrupted keys and the one never started are all queued');

  // The next term (this replica leads again) picks them all up.
  const secondTerm = new AbortController();
  const second: string[] = [];
  const run2 = runController(controller(async (key) => void second.push(key), 2), q, secondTerm.signal, { log });
  await until(() => second.length === 4, 'the next term to reconcile every key');
  assert.deepEqual(second.sort(), ['node-1', 'node-2', 'node-3', 'node-4']);
  secondTerm.abort();
  await run2;
});

test('shutting the queue down ends the run; a concurrency below 1 is refused', async () => {
  const q = new RateLimitedQueue<string>();
  const run = runController(controller(async () => {}, 3), q, new AbortController().signal, { log });
  q.shutDown();
  await run;
  await assert.rejects(runController(controller(async () => {}, 0), q, new AbortController().signal, { log }), RangeError);
});

test('an event handler that throws is logged, not thrown into the cache that emitted the change', () => {
  const lines: string[] = [];
  const collecting = createLogger({ level: 'error', write: (l) => lines.push(l) });
  const q = new RateLimitedQueue<string>();
  const c: KeyedController<string, string[]> = {
    ...controller(async () => {}),
    keysFor: () => {
      throw new Error('bad change');
    },
  };
  enqueueChange(c, q, ['x'], collecting);
  assert.equal(q.len(), 0);
  assert.match(lines.join('\n'), /mapping a change to keys failed/);
});
