// The audit trail across a failover: two mcplane-server processes on a real etcd; writes (and a
// refused one) through the leader, the leader killed with SIGKILL, and the survivor shows every
// record through `mcctl get audit`, then records its own writes beside them.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { connect } from '../../src/cli/client/connection.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { replicaSetFixture } from '../helpers/server-fixture.ts';

const { pki, set } = replicaSetFixture({ members: 1, count: 2 });

interface AuditItem { method: string; result: string; replica: string; user: { subject: string }; objects: { kind: string; name: string }[] }

async function auditOn(i: number): Promise<AuditItem[]> {
  const r = await runCliAsync(['get', 'audit', '-o', 'json', '--server', set.addresses[i]!, '--pki-dir', pki.dir]);
  assert.equal(r.status, 0, r.stderr);
  return (JSON.parse(r.stdout) as { items: AuditItem[] }).items;
}

test('audit records written on the leader survive its SIGKILL: the survivor lists them and adds its own', async () => {
  assert.equal(await set.waitForLeader(10_000), 0);
  const c = set.admin(0);
  await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: true }, 'pause');
  await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: false }, 'resume');
  const issued = await runCliAsync(['pki', 'operator', 'failover-viewer', '--role', 'viewer', '--pki-dir', pki.dir]);
  assert.equal(issued.status, 0, issued.stderr);
  const viewer = connect({ server: set.addresses[0]!, ca: join(pki.dir, 'ca.crt'), cert: join(pki.dir, 'operators', 'failover-viewer.crt'), key: join(pki.dir, 'operators', 'failover-viewer.key'), config: '/dev/null' });
  await assert.rejects(call(viewer, viewer.config.setPoolPaused.bind(viewer.config), { name: 'master', paused: true }, 'pause'));
  viewer.close();
  const before = await auditOn(0);
  assert.equal(before.length, 3);

  await set.kill(0);
  assert.equal(await set.waitForLeader(15_000, 0), 1);
  const after = await auditOn(1);
  assert.deepEqual(after, before, 'every record, as the killed leader showed them');
  assert.deepEqual(after.map((a) => [a.method, a.result, a.replica]), [
    ['ConfigService/SetPoolPaused', 'OK', 'replica-0'],
    ['ConfigService/SetPoolPaused', 'OK', 'replica-0'],
    ['ConfigService/SetPoolPaused', 'PERMISSION_DENIED', 'replica-0'],
  ]);
  assert.equal(after[2]!.user.subject, 'CN=failover-viewer, O=mcplane:viewers');

  const s = set.admin(1);
  await call(s, s.config.labelNode.bind(s.config), { name: 'nobody', set: { a: 'b' }, remove: [] }, 'label').catch(() => undefined);
  const latest = (await auditOn(1)).at(-1)!;
  assert.deepEqual([latest.method, latest.result, latest.replica], ['ConfigService/LabelNode', 'NOT_FOUND', 'replica-1']);
});
