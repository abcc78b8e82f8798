// Revocation takes effect at once on every replica (issue 17, hole 3): an agent whose stream is
// held by one replica is cut off when an operator revokes or deletes it through another, and no
// replica accepts the certificate after.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { call } from '../../src/cli/client/call.ts';
import { replicaSetFixture } from '../helpers/server-fixture.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';

const { pki, set, agents } = replicaSetFixture({ members: 1, count: 2 });

const connectTo = async (i: number, name: string) => {
  const a = new SimulatedAgent({ address: set.addresses[i]!, tls: await pki.node(name, 'worker'), name, autoDone: true });
  agents.push(a);
  await a.connect();
  return a;
};

for (const how of ['revoke', 'delete'] as const) {
  test(`${how} through replica 0 ends the stream replica 1 holds at once, and neither replica accepts the certificate again`, async () => {
    const name = `cut-${how}`;
    const a = await connectTo(1, name);
    assert.equal(a.error, undefined);
    assert.equal(a.pool, 'worker');
    const c = set.admin(0);
    if (how === 'revoke') await call(c, c.identity.revokeNode.bind(c.identity), { name }, 'revoke');
    else await call(c, c.config.delete.bind(c.config), { kind: 'Node', name }, 'delete');
    await a.waitFor(() => a.ended, 5000);
    // Read again: the assertion above narrowed a.error to undefined for the compiler.
    const ended = (a as SimulatedAgent).error;
    assert.equal(ended?.code, Status.PERMISSION_DENIED, ended?.details);
    for (const i of [0, 1]) {
      const again = await connectTo(i, name);
      assert.equal(again.error?.code, Status.PERMISSION_DENIED, `replica ${i}: ${again.error?.details}`);
      assert.match(again.error!.details, /revoked/);
    }
  });
}
