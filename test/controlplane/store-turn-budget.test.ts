// A long run of SQLite commits must not keep the event loop from reading sockets. node:sqlite
// commits synchronously; when every commit resolved at once, a controller's batch of commits and
// what their watch events set off ran as one microtask chain, and an agent's report or a status
// read waited for the whole of it (140-180 ms chains in a 1,000-agent fan-out). The store now
// gives the loop a turn once the turn budget (runtime/turn-budget.ts) is spent.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { test } from 'node:test';
import { SqliteStore } from '../../src/controlplane/store/sqlite-store.ts';
import { TURN_BUDGET_MS, turnIfDue } from '../../src/runtime/turn-budget.ts';

function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) { /* a controller's synchronous work */ }
}

test('turnIfDue: nothing to wait for within the budget; past it, one turn that pending I/O callbacks run before', async () => {
  busy(TURN_BUDGET_MS + 1);
  await turnIfDue(); // a fresh turn
  assert.equal(turnIfDue(), undefined, 'within the budget the caller goes on at once');
  let immediateRan = false;
  setImmediate(() => { immediateRan = true; });
  busy(TURN_BUDGET_MS + 1);
  const turn = turnIfDue();
  assert.ok(turn, 'past the budget the caller waits for a turn');
  assert.equal(turnIfDue(), turn, 'every yield point waits for the same turn');
  await turn;
  assert.ok(immediateRan, 'what was queued before the turn ran before it ended');
});

test('a chain of SQLite commits lets the loop read a socket while it runs', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-turns-'));
  const store = new SqliteStore(dir);
  const server = createServer((socket) => socket.on('data', () => { readAt ??= performance.now(); }));
  t.after(async () => {
    server.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  let readAt: number | undefined;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = createConnection((server.address() as AddressInfo).port, '127.0.0.1');
  await new Promise<void>((resolve) => client.once('connect', resolve));
  t.after(() => client.destroy());

  // One async function, as a controller's reconcile is: commit, work, commit, ... 100 times.
  let chainStart = 0;
  const chain = (async () => {
    chainStart = performance.now();
    for (let i = 0; i < 100; i++) {
      await store.commit([{ type: 'put', kind: 'Node', name: `n-${i}`, value: { labels: {} } }]);
      busy(2);
    }
    return performance.now();
  })();
  client.write('a status read');
  const chainEnd = await chain;
  assert.ok(chainEnd - chainStart > 200, `the chain ran ${(chainEnd - chainStart).toFixed(0)} ms`);
  assert.ok(readAt !== undefined, 'the socket was read');
  // Within the chain's first half: "while it runs, not after it". A fixed 100 ms failed beside
  // other CPU work (read 125 ms into a 2,093 ms chain), where every turn is slower alike.
  assert.ok(readAt - chainStart < (chainEnd - chainStart) / 2, `the socket was read ${(readAt - chainStart).toFixed(0)} ms into a ${(chainEnd - chainStart).toFixed(0)} ms chain of commits, not after it`);
});
