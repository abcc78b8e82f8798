// The audit trail: every write through the API, and every refused one, stored with who (subject,
// serial, role), when, from where, what and the result, read back with ListAuditRecords and
// `mcctl get audit`, and logged as a structured line. Runs on SQLite and on etcd (scripts/test.sh).

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { status as Status, type ServiceError } from '@grpc/grpc-js';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { connect, type Clients } from '../../src/cli/client/connection.ts';
import type { AuditRecord__Output } from '../../src/runtime/generated/mcplane/v1/AuditRecord.ts';
import { requestEnrollment } from '../helpers/bootstrap-client.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
let c: Clients;
let viewer: Clients;
let adminSerial = '';
let replica = '';
const agents: SimulatedAgent[] = [];

before(async () => {
  server = await startTestServer({ bootstrap: true });
  c = server.admin();
  adminSerial = new X509Certificate(readFileSync(join(server.pki.dir, 'admin.crt'))).serialNumber.toLowerCase();
  replica = (await call(c, c.status.getServerInfo.bind(c.status), {}, 'info')).replica;
  const issued = await runCliAsync(['pki', 'operator', 'audit-viewer', '--role', 'viewer', '--pki-dir', server.pki.dir]);
  assert.equal(issued.status, 0, issued.stderr);
  const dir = join(server.pki.dir, 'operators');
  viewer = connect({ server: server.address, ca: join(server.pki.dir, 'ca.crt'), cert: join(dir, 'audit-viewer.crt'), key: join(dir, 'audit-viewer.key'), config: '/dev/null' });
  for (const name of ['a1', 'a2']) {
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, autoDone: true });
    await agent.connect();
    agents.push(agent);
  }
});

after(async () => {
  for (const a of agents) a.close();
  viewer.close();
  await server.close();
});

async function records(): Promise<AuditRecord__Output[]> {
  return (await call(c, c.identity.listAuditRecords.bind(c.identity), { sinceUnixMs: 0, limit: 0 }, 'list audit')).records;
}

/** The newest record of `method`, which must have been written at or after `since`. */
async function newest(method: string, since: number): Promise<AuditRecord__Output> {
  const found = (await records()).filter((r) => r.method === method && Number(r.timeUnixMs) >= since).at(-1);
  assert.ok(found, `an audit record of ${method}`);
  return found;
}

/** What every record of an admin's successful write holds. */
function assertAdminOk(r: AuditRecord__Output, objects: { kind: string; name: string }[]): void {
  assert.equal(r.subject, 'CN=admin, O=mcplane:admins');
  assert.equal(r.serial, adminSerial);
  assert.equal(r.role, 'admin');
  assert.match(r.peer, /127\.0\.0\.1/);
  assert.equal(r.replica, replica);
  assert.equal(r.result, 'OK', r.message);
  assert.deepEqual(r.objects.map((o) => ({ kind: o.kind, name: o.name })), objects);
}

const rawCall = (client: Clients, service: 'config' | 'identity', method: string, request: unknown): Promise<ServiceError | null> => new Promise((resolve) => {
  const s = client[service] as unknown as Record<string, (req: unknown, cb: (err: ServiceError | null) => void) => void>;
  s[method]!.call(s, request, (err) => resolve(err));
});

test('apply (and its dry run) and delete are audited with the objects they wrote', async () => {
  const since = Date.now();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'audit-pool.yaml', text: poolYaml('audited') }], dryRun: true }, 'apply');
  const dry = await newest('ConfigService/Apply', since);
  assertAdminOk(dry, [{ kind: 'MachineConfigPool', name: 'audited' }]);
  assert.equal(dry.message, 'dry run: nothing stored');
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'audit-pool.yaml', text: poolYaml('audited') }], dryRun: false }, 'apply');
  const applied = (await records()).filter((r) => r.method === 'ConfigService/Apply' && !r.message).at(-1)!;
  assertAdminOk(applied, [{ kind: 'MachineConfigPool', name: 'audited' }]);
  await call(c, c.config.delete.bind(c.config), { kind: 'MachineConfigPool', name: 'audited' }, 'delete');
  assertAdminOk(await newest('ConfigService/Delete', since), [{ kind: 'MachineConfigPool', name: 'audited' }]);
});

test('pause, resume, label and re-apply are audited', async () => {
  const since = Date.now();
  await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: true }, 'pause');
  assertAdminOk(await newest('ConfigService/SetPoolPaused', since), [{ kind: 'MachineConfigPool', name: 'worker' }]);
  await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: false }, 'resume');
  assert.equal((await records()).filter((r) => r.method === 'ConfigService/SetPoolPaused' && Number(r.timeUnixMs) >= since).length, 2);
  await call(c, c.config.labelNode.bind(c.config), { name: 'a1', set: { 'example.com/rack': 'r1' }, remove: [] }, 'label');
  assertAdminOk(await newest('ConfigService/LabelNode', since), [{ kind: 'Node', name: 'a1' }]);
  await eventually(async () => (await call(c, c.status.getNode.bind(c.status), { name: 'a1' }, 'get')).status?.connected === true, 10_000, 'a1 connected');
  await call(c, c.config.reapplyNode.bind(c.config), { name: 'a1' }, 'reapply');
  assertAdminOk(await newest('ConfigService/ReapplyNode', since), [{ kind: 'Node', name: 'a1' }]);
});

test('bootstrap token create and delete, and node revocation, are audited', async () => {
  const since = Date.now();
  const created = await call(c, c.identity.createBootstrapToken.bind(c.identity), { pool: 'worker', ttlMs: 60_000, description: 'audit' }, 'create token');
  assertAdminOk(await newest('IdentityService/CreateBootstrapToken', since), [{ kind: 'BootstrapToken', name: created.info!.id }]);
  // The secret is in the answer only, never in the trail.
  assert.ok(!JSON.stringify(await records()).includes(created.token));
  await call(c, c.identity.deleteBootstrapToken.bind(c.identity), { id: created.info!.id }, 'delete token');
  assertAdminOk(await newest('IdentityService/DeleteBootstrapToken', since), [{ kind: 'BootstrapToken', name: created.info!.id }]);
  await call(c, c.identity.revokeNode.bind(c.identity), { name: 'a2' }, 'revoke');
  assertAdminOk(await newest('IdentityService/RevokeNode', since), [{ kind: 'Node', name: 'a2' }]);
});

test('enrollment approvals and denials are audited with the request and its node', async () => {
  const since = Date.now();
  const approved = await requestEnrollment(server, 'audit-approved', 'worker');
  const denied = await requestEnrollment(server, 'audit-denied', 'worker');
  await call(c, c.identity.approveEnrollmentRequest.bind(c.identity), { name: approved.body.id }, 'approve');
  assertAdminOk(await newest('IdentityService/ApproveEnrollmentRequest', since), [{ kind: 'EnrollmentRequest', name: `${approved.body.id} (audit-approved)` }]);
  await call(c, c.identity.denyEnrollmentRequest.bind(c.identity), { name: denied.body.id, reason: 'not ours' }, 'deny');
  assertAdminOk(await newest('IdentityService/DenyEnrollmentRequest', since), [{ kind: 'EnrollmentRequest', name: `${denied.body.id} (audit-denied)` }]);
});

test('refusals are audited: a viewer\'s write (PERMISSION_DENIED) and an invalid apply (INVALID_ARGUMENT)', async () => {
  const since = Date.now();
  const err = await rawCall(viewer, 'config', 'SetPoolPaused', { name: 'master', paused: true });
  assert.equal(err?.code, Status.PERMISSION_DENIED);
  const refused = await newest('ConfigService/SetPoolPaused', since);
  assert.equal(refused.subject, 'CN=audit-viewer, O=mcplane:viewers');
  assert.equal(refused.role, 'viewer');
  assert.equal(refused.serial, new X509Certificate(readFileSync(join(server.pki.dir, 'operators', 'audit-viewer.crt'))).serialNumber.toLowerCase());
  assert.equal(refused.result, 'PERMISSION_DENIED');
  assert.match(refused.message, /needs the operator role/);
  assert.deepEqual(refused.objects.map((o) => `${o.kind}/${o.name}`), ['MachineConfigPool/master']);
  // Reads are not audited: a viewer's list leaves no record.
  const before = (await records()).length;
  await call(viewer, viewer.status.listPools.bind(viewer.status), {}, 'list');
  assert.equal((await records()).length, before);

  const invalid = await rawCall(c, 'config', 'Apply', { manifests: [{ source: 'broken.yaml', text: 'kind: MachineConfig\nmetadata: {name: x}\n' }], dryRun: false });
  assert.equal(invalid?.code, Status.INVALID_ARGUMENT);
  const failed = await newest('ConfigService/Apply', since);
  assert.equal(failed.result, 'INVALID_ARGUMENT');
  assert.equal(failed.subject, 'CN=admin, O=mcplane:admins');
  assert.deepEqual(failed.objects.map((o) => `${o.kind}/${o.name}`), ['manifest/broken.yaml']);
  assert.ok(failed.message.length > 0);
});

test('each record is also a structured log line (key `audit`)', async () => {
  const since = Date.now();
  await call(c, c.config.labelNode.bind(c.config), { name: 'a1', set: { 'example.com/logged': 'yes' }, remove: [] }, 'label');
  const lines = server.logs.map((l) => JSON.parse(l.replace(/^<\d>/, '')) as { audit?: { method: string; at: number; subject: string; serial: string; peer: string; objects: unknown[]; result: string } });
  const line = lines.find((l) => l.audit?.method === 'ConfigService/LabelNode' && l.audit.at >= since);
  assert.ok(line, 'a log line of the label');
  assert.equal(line.audit!.subject, 'CN=admin, O=mcplane:admins');
  assert.equal(line.audit!.serial, adminSerial);
  assert.equal(line.audit!.result, 'OK');
  assert.deepEqual(line.audit!.objects, [{ kind: 'Node', name: 'a1' }]);
});

test('mcctl get audit: table, --since, -l on the result, -o json', async () => {
  await rawCall(viewer, 'config', 'ReapplyNode', { name: 'a1' });
  const pki = ['--server', server.address, '--pki-dir', server.pki.dir];
  const table = await runCliAsync(['get', 'audit', ...pki]);
  assert.equal(table.status, 0, table.stderr);
  assert.match(table.stdout, /^TIME\s+USER\s+ROLE\s+METHOD\s+OBJECTS\s+RESULT\n/);
  assert.match(table.stdout, /audit-viewer\s+viewer\s+ConfigService\/ReapplyNode\s+Node\/a1\s+PERMISSION_DENIED/);
  const refusals = await runCliAsync(['get', 'audit', '--since', '1h', '-l', 'result=PERMISSION_DENIED', '-o', 'json', ...pki]);
  assert.equal(refusals.status, 0, refusals.stderr);
  const items = (JSON.parse(refusals.stdout) as { items: { user: { subject: string; role: string }; result: string; method: string; sourceAddress: string }[] }).items;
  assert.ok(items.length >= 2);
  assert.ok(items.every((i) => i.result === 'PERMISSION_DENIED' && i.user.role === 'viewer'));
  assert.ok(items.some((i) => i.method === 'ConfigService/ReapplyNode' && /127\.0\.0\.1/.test(i.sourceAddress)));
  // --since leaves out what is older.
  const none = await runCliAsync(['get', 'audit', '--since', '0s', '-o', 'json', ...pki]);
  assert.equal(none.status, 0, none.stderr);
  assert.deepEqual((JSON.parse(none.stdout) as { items: unknown[] }).items, []);
  const bad = await runCliAsync(['get', 'pools', '--since', '1h', ...pki]);
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /--since filters the audit trail only/);
});

test('the trail is bounded: at most --audit-max-records, the oldest pruned; nothing older than --audit-retention is kept', async () => {
  const small = await startTestServer({ audit: { maxRecords: 3, retentionMs: 3_000 } });
  try {
    const s = small.admin();
    const list = async () => (await call(s, s.identity.listAuditRecords.bind(s.identity), { sinceUnixMs: 0, limit: 0 }, 'list audit')).records;
    for (let i = 0; i < 6; i++) await call(s, s.config.setPoolPaused.bind(s.config), { name: 'worker', paused: i % 2 === 0 }, 'pause');
    const kept = await list();
    assert.equal(kept.length, 3);
    // The newest three: paused, resumed, paused... the last was i=5 (resume).
    assert.ok(kept.every((r, i) => i === 0 || r.id > kept[i - 1]!.id));
    await new Promise((r) => setTimeout(r, 3_200));
    assert.deepEqual(await list(), [], 'past the retention, no record is shown');
    await call(s, s.config.setPoolPaused.bind(s.config), { name: 'worker', paused: false }, 'resume');
    // The write pruned the expired ones from the store too.
    const stored = await small.handle.controlPlane.store.list(['AuditRecord']);
    assert.equal(stored.items.length, 1);
  } finally {
    await small.close();
  }
});
