import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ReconcileLoop } from '../../src/controlplane/reconcile-loop.ts';
import { createLogger } from '../../src/runtime/logger.ts';

const silent = createLogger({ level: 'silent' });

test('passes never overlap: runNow, scheduled passes and bursts of changes are serialized', async () => {
  let active = 0;
  let maxActive = 0;
  let passes = 0;
  const loop = new ReconcileLoop([{
    name: 'slow',
    async run() {
      active++;
      maxActive = Math.max(maxActive, active);
      await new Promise((r) => setTimeout(r, 30));
      active--;
      passes++;
    },
  }], silent);
  loop.schedule();
  await new Promise((r) => setTimeout(r, 25)); // the scheduled pass is running now
  const now = loop.runNow();
  for (let i = 0; i < 50; i++) loop.schedule();
  await now;
  await new Promise((r) => setTimeout(r, 150));
  assert.equal(maxActive, 1, 'two passes ran at once');
  assert.ok(passes >= 2 && passes <= 4, `bursts coalesce into a few passes (${passes})`);
  await loop.stop();
});

test('a failing step is logged and does not stop the other steps or later passes', async () => {
  const lines: string[] = [];
  const ran: string[] = [];
  const loop = new ReconcileLoop([
    { name: 'broken', run() { throw new Error('boom'); } },
    { name: 'fine', run() { ran.push('fine'); } },
  ], createLogger({ write: (l) => lines.push(l) }));
  await loop.runNow();
  await loop.runNow();
  assert.deepEqual(ran, ['fine', 'fine']);
  assert.ok(lines.some((l) => l.includes('"step":"broken"') && l.includes('reconcile step failed')));
  await loop.stop();
});
