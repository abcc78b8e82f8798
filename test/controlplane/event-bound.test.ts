// The events' bound, cut in amortized steps: the leader cuts the stored events back to
// MAX_EVENTS once there are PRUNE_SLACK more, not on every pass (a cut sorts every event, and a
// fan-out makes a pass per batch of status reports); an event past its hour goes at the first
// pass after it expires, whatever the count. Real server on a real store, events read over gRPC.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { EVENT_TTL_MS, MAX_EVENTS, PRUNE_SLACK, eventName } from '../../src/controlplane/controllers/event-recorder.ts';
import { LeaderWriter } from '../../src/controlplane/replica/leader-writer.ts';
import type { WriteOp } from '../../src/controlplane/store/store.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const fx = serverFixture();

test('events are cut back to the bound once there are PRUNE_SLACK more, and an expired one goes at once', async () => {
  const cp = fx.server.handle.controlPlane;
  const writer = new LeaderWriter(cp.cache, cp.election);
  const now = Date.now();
  let written = 0;
  /** Stores `n` events, each a second newer than the last. */
  const store = async (n: number): Promise<void> => {
    const ops: WriteOp[] = [];
    for (let i = 0; i < n; i++, written++) {
      const message = `bench event ${written}`;
      const at = now - 3600_000 / 2 + written * 1000;
      ops.push({ type: 'put', kind: 'Event', name: eventName({ object: 'pool/worker', reason: 'Test', message }), value: { type: 'Normal', reason: 'Test', object: 'pool/worker', message, pool: 'worker', firstTimestamp: at, lastTimestamp: at, count: 1 }, expectedVersion: null });
    }
    await writer.commitEach(ops);
  };
  // Every event counts against the bound, the server's own (its pools rendered) too.
  const listed = async () => (await call(fx.c, fx.c.status.listEvents.bind(fx.c.status), { node: '', pool: '', limit: 0 }, 'events')).events;
  const own = (await listed()).length;

  await store(MAX_EVENTS + PRUNE_SLACK / 2 - own);
  await cp.events.reconcile(undefined, now);
  assert.equal((await listed()).length, MAX_EVENTS + PRUNE_SLACK / 2, 'within the slack, a pass cuts nothing');

  await store(PRUNE_SLACK);
  await cp.events.reconcile(undefined, now);
  const cut = await listed();
  assert.equal(cut.length, MAX_EVENTS, 'past the slack, a pass cuts back to the bound');
  // The server's own events are newer than these (their times are half an hour back and on).
  const oldest = written - (MAX_EVENTS - own);
  assert.equal(cut[0]!.message, `bench event ${oldest}`, 'the oldest went first');

  // The oldest one's hour is over: it goes at the next pass, though the count is below the bound.
  await cp.events.reconcile(undefined, now - 3600_000 / 2 + oldest * 1000 + EVENT_TTL_MS + 1);
  const afterExpiry = await listed();
  assert.equal(afterExpiry.length, MAX_EVENTS - 1, 'the expired event is gone');
  assert.equal(afterExpiry[0]!.message, `bench event ${oldest + 1}`, 'the one gone is the oldest');
});
