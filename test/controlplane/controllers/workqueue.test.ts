// The keyed work queue keeps client-go's workqueue rules: one entry per key while queued, never
// the same key to two workers, a key added while held comes back after done(), per-key
// exponential backoff that forget() resets, delays that keep the earlier time, and a shutdown or
// an abort that wakes whoever waits. Timings are checked as orderings and lower bounds (a timer
// never fires early), never as upper bounds on a shared machine.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { ExponentialBackoff, RateLimitedQueue } from '../../../src/controlplane/controllers/rate-limited-queue.ts';

/** Resolves with what `p` settles to, or 'pending' if it has not after the microtasks and a timer tick. */
async function state<T>(p: Promise<T>): Promise<T | 'pending'> {
  return Promise.race([p, sleep(5).then(() => 'pending' as const)]);
}

test('a key added while it waits in the queue is queued once; keys come out in the order they went in', async () => {
  const q = new RateLimitedQueue<string>();
  for (const k of ['a', 'b', 'a', 'c', 'b', 'a']) q.add(k);
  assert.equal(q.len(), 3);
  assert.equal(await q.get(), 'a');
  assert.equal(await q.get(), 'b');
  assert.equal(await q.get(), 'c');
  assert.equal(q.len(), 0);
});

test('a key a worker holds is not handed to another worker; added meanwhile, it comes back once after done()', async () => {
  const q = new RateLimitedQueue<string>();
  q.add('node-1');
  assert.equal(await q.get(), 'node-1');
  q.add('node-1');
  q.add('node-1');
  assert.equal(q.len(), 0, 'held, so only marked dirty');
  const second = q.get();
  assert.equal(await state(second), 'pending', 'another worker must not get the held key');
  q.done('node-1');
  assert.equal(await second, 'node-1', 'the change that came in during processing is not lost');
  q.done('node-1');
  assert.equal(q.len(), 0, 'not dirty this time, so not queued again');
});

test('a waiting get() is handed a key as soon as it is added, oldest waiter first', async () => {
  const q = new RateLimitedQueue<string>();
  const first = q.get();
  const second = q.get();
  q.add('x');
  assert.equal(await first, 'x');
  assert.equal(await state(second), 'pending');
  q.add('y');
  assert.equal(await second, 'y');
});

test('addAfter adds the key once its delay passes, and a key already waiting keeps the earlier time', async () => {
  const q = new RateLimitedQueue<string>();
  // Before the timers are set: a pause between them and this line would shorten the wait seen.
  const start = performance.now();
  q.addAfter('late', 60_000);
  q.addAfter('late', 10);
  q.addAfter('soon', 10);
  q.addAfter('soon', 60_000);
  assert.equal(q.delayedLen(), 2);
  assert.equal(q.len(), 0);
  const got = [await q.get(), await q.get()].sort();
  assert.deepEqual(got, ['late', 'soon'], 'both came at the earlier of their times, not after a minute');
  assert.ok(performance.now() - start >= 8);
  assert.equal(q.delayedLen(), 0);
});

test('the backoff doubles per failure from the base, stops at the cap, and forget() starts it again', () => {
  const b = new ExponentialBackoff<string>(5, 100);
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map(() => b.when('pool/a')), [5, 10, 20, 40, 80, 100, 100]);
  assert.equal(b.numRequeues('pool/a'), 7);
  assert.equal(b.when('pool/b'), 5, 'each key has its own count');
  b.forget('pool/a');
  assert.equal(b.numRequeues('pool/a'), 0);
  assert.equal(b.when('pool/a'), 5);
  for (let i = 0; i < 1200; i++) b.when('pool/c');
  assert.equal(b.when('pool/c'), 100, 'thousands of failures stay at the cap (no overflow to NaN)');
  assert.throws(() => new ExponentialBackoff(0, 10), RangeError);
});

test('addRateLimited waits longer after each failure, per key: a key that failed often comes after one that failed once', async () => {
  const q = new RateLimitedQueue<string>({ rateLimiter: new ExponentialBackoff(4, 10_000) });
  // Five failures of one key, each retried when it comes back: each wait at least doubles.
  const gaps: number[] = [];
  q.add('flaky');
  for (let i = 0; i < 5; i++) {
    const key = await q.get();
    // Before the timer is set: a pause between the two would shorten the wait seen.
    const at = performance.now();
    q.addRateLimited(key!);
    q.done(key!);
    await q.get();
    gaps.push(performance.now() - at);
    q.done('flaky');
    q.add('flaky');
  }
  await q.get();
  q.done('flaky');
  // Lower bounds only (timers never fire early; a loaded machine makes them late, not early).
  // 1 ms slack: Node rounds timer start times to the millisecond.
  [4, 8, 16, 32, 64].forEach((want, i) => assert.ok(gaps[i]! >= want - 1, `wait ${i} was ${gaps[i]} ms, want >= ${want}`));
  assert.ok(gaps[4]! > gaps[0]!, `the fifth wait (${gaps[4]}) is longer than the first (${gaps[0]})`);
  assert.equal(q.numRequeues('flaky'), 5);

  // Ordering: 'flaky' now waits 128 ms, a fresh key 4 ms: the fresh one comes first.
  q.addRateLimited('flaky');
  q.addRateLimited('fresh');
  assert.equal(await q.get(), 'fresh');
  assert.equal(await q.get(), 'flaky');
  q.done('fresh');
  q.done('flaky');

  // forget() resets: the next failure waits the base again, so it beats a key with one failure.
  q.forget('flaky');
  assert.equal(q.numRequeues('flaky'), 0);
  q.addRateLimited('fresh'); // second failure: 8 ms
  q.addRateLimited('flaky'); // first failure after forget: 4 ms
  assert.equal(await q.get(), 'flaky');
  assert.equal(await q.get(), 'fresh');
});

test('shutDown wakes every waiting get() with undefined, drops new keys and delayed ones, and hands out what was already queued', async () => {
  const q = new RateLimitedQueue<string>();
  const waiting = [q.get(), q.get(), q.get()];
  q.shutDown();
  assert.deepEqual(await Promise.all(waiting), [undefined, undefined, undefined]);
  assert.equal(q.shuttingDown(), true);

  const q2 = new RateLimitedQueue<string>();
  q2.add('queued');
  q2.addAfter('delayed', 5);
  q2.shutDown();
  q2.add('after');
  q2.addAfter('after-delay', 1);
  q2.addRateLimited('after-failure');
  assert.equal(q2.delayedLen(), 0);
  assert.equal(await q2.get(), 'queued');
  await sleep(15);
  assert.equal(await q2.get(), undefined);
});

test('a get() whose signal aborts resolves undefined and takes nothing: the next key goes to a worker still waiting', async () => {
  const q = new RateLimitedQueue<string>();
  const already = new AbortController();
  already.abort();
  q.add('k0');
  assert.equal(await q.get(already.signal), undefined, 'an aborted signal takes no key');
  assert.equal(q.len(), 1);
  assert.equal(await q.get(), 'k0');

  const stopping = new AbortController();
  const cancelled = q.get(stopping.signal);
  const other = q.get();
  stopping.abort();
  assert.equal(await cancelled, undefined);
  q.add('k1');
  assert.equal(await other, 'k1', 'the aborted waiter no longer holds a place in line');
});

test('delays never keep the process alive: a key due in an hour does not stop a script from exiting', async () => {
  const queueModule = fileURLToPath(new URL('../../../src/controlplane/controllers/rate-limited-queue.ts', import.meta.url));
  const script = `
    const { RateLimitedQueue } = await import(${JSON.stringify(queueModule)});
    const q = new RateLimitedQueue();
    q.addAfter('later', 3_600_000);
    for (let i = 0; i < 40; i++) q.addRateLimited('failing');
    console.log('queued');
  `;
  // Without unref the hour-long timer holds the child, and execFile's timeout kills it.
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { timeout: 20_000 });
  assert.equal(stdout.trim(), 'queued');
});
