// Certificate rotation across replicas (issue 17): three replicas on etcd, each holding the CA
// key, agents spread over them on 6-second certificates. Every agent renews several times on
// whichever replica holds its stream, the binding each renewal commits is seen by the others,
// and no stream drops and no operator call to any replica fails meanwhile.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { certificateBinding, certificateValidity } from '../../src/runtime/pki.ts';
import { replicaSetFixture } from '../helpers/server-fixture.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';

// 9 s: a stream ends with its certificate, so a renewal (at 6 s) has 3 s to land even on a loaded machine.
const LIFETIME_MS = 9000;
// ca.key is in the PKI directory: every replica signs renewals.
const { pki, set, agents } = replicaSetFixture({ members: 1, count: 3, args: ['--node-certificate-lifetime', '6s'] });

const shortLived = (name: string) => pki.shortLivedNode(name, LIFETIME_MS);

test('six agents over three replicas renew several times each: no stream dropped, no call failed, every replica sees the newest binding', async () => {
  for (let i = 0; i < 6; i++) {
    const name = `rep-rot-${i}`;
    const others = set.addresses.filter((_, j) => j !== i % 3);
    const a = new SimulatedAgent({ address: set.addresses[i % 3]!, failover: others, tls: await shortLived(name), name, autoRenew: true, autoDone: true });
    agents.push(a);
    await a.connect();
    assert.equal(a.error, undefined, `${name}: ${a.error?.details}`);
  }
  let calls = 0;
  const failures: string[] = [];
  const deadline = Date.now() + 3.5 * LIFETIME_MS;
  while (Date.now() < deadline) {
    for (let r = 0; r < 3; r++) {
      const c = set.admin(r);
      try {
        const page = await call(c, c.status.listNodes.bind(c.status), { pool: '', limit: 0, continueToken: '' }, 'list nodes');
        const down = page.nodes.filter((n) => n.name.startsWith('rep-rot-') && !n.status?.connected).map((n) => n.name);
        if (down.length) failures.push(`replica ${r} saw ${down.join(', ')} disconnected at ${Date.now()}`);
        calls++;
      } catch (err) {
        failures.push(`replica ${r}: ${(err as Error).message}`);
      }
    }
    await new Promise((res) => setTimeout(res, 200));
  }
  assert.deepEqual(failures, [], `${failures.length} of ${calls} calls failed`);
  for (const a of agents) {
    assert.ok(a.renewals.length >= 3, `${a.options.name} renewed ${a.renewals.length} times`);
    assert.equal(a.drops, 0, `${a.options.name}: a stream was dropped (${a.error?.details})`);
    assert.deepEqual(a.renewalFailures, []);
    assert.ok(certificateValidity(a.certificatePem).notAfter > Date.now(), `${a.options.name} runs on a live certificate`);
  }
  // Renewed on the replica holding each stream; the binding it committed is what all replicas serve.
  const renewedOn = new Set(agents.flatMap((a) => a.renewals.map((r) => r.address)));
  assert.equal(renewedOn.size, 3, `renewals signed on ${[...renewedOn].join(', ')}`);
  for (let r = 0; r < 3; r++) {
    const c = set.admin(r);
    for (const a of agents) {
      const node = await call(c, c.status.getNode.bind(c.status), { name: a.options.name }, 'get node');
      // The first certificate ran out long ago: every replica shows a renewed one.
      const bound = Number(node.certificateNotAfterUnixMs);
      assert.ok(bound > Date.now() && bound <= certificateBinding(a.certificatePem).notAfter + LIFETIME_MS, `replica ${r}: ${a.options.name} bound to a current certificate`);
    }
  }
});
