// API roles: every RPC of every operator-facing service, called through real gRPC with a viewer,
// a pool-scoped operator, an operator, an admin (and a node) certificate, each issued by
// `mcctl pki operator` (admin: the admin.crt `mcctl pki init` writes). Each call is either refused
// with PERMISSION_DENIED or reaches its handler (any other answer), as access-rules.ts says.

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { status as Status, type ServiceError } from '@grpc/grpc-js';
import { after, before, test } from 'node:test';
import { connect, type Clients } from '../../src/cli/client/connection.ts';
import { CONFIG_RULES, IDENTITY_RULES, STATUS_RULES, type Rule } from '../../src/controlplane/api/access-rules.ts';
import { loadMcplaneProto } from '../../src/runtime/proto.ts';
import { call } from '../../src/cli/client/call.ts';
import { requestEnrollment } from '../helpers/bootstrap-client.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

type Who = 'node' | 'viewer' | 'edge-operator' | 'operator' | 'admin';
const WHO: Who[] = ['node', 'viewer', 'edge-operator', 'operator', 'admin'];
/** Where a call lands for a pool-scoped operator (of pool edge): in its pool, outside, or no pool. */
type Scope = 'in' | 'out' | 'none';
type ServiceKey = 'status' | 'config' | 'identity';

let server: TestServer;
const clients = new Map<Who, Clients>();
const agents: SimulatedAgent[] = [];
let edgeRequest = '';
let workerRequest = '';

before(async () => {
  server = await startTestServer({ bootstrap: true, statusListen: '127.0.0.1:0' });
  const admin = server.admin();
  await call(admin, admin.config.apply.bind(admin.config), { manifests: [{ source: 'edge.yaml', text: poolYaml('edge') }], dryRun: false }, 'apply');
  const pki = server.pki.dir;
  const issue = async (name: string, ...flags: string[]): Promise<void> => {
    const r = await runCliAsync(['pki', 'operator', name, '--pki-dir', pki, ...flags]);
    assert.equal(r.status, 0, r.stderr);
  };
  await issue('grafana', '--role', 'viewer');
  await issue('edge-ops', '--role', 'operator', '--pool', 'edge');
  await issue('ops', '--role', 'operator');
  const files = (base: string) => ({ server: server.address, ca: join(pki, 'ca.crt'), cert: join(pki, `${base}.crt`), key: join(pki, `${base}.key`), config: '/dev/null' });
  const node = await server.pki.node('w1');
  clients.set('node', connect({ server: server.address, ca: node.ca, cert: node.cert, key: node.key, config: '/dev/null' }));
  clients.set('viewer', connect(files('operators/grafana')));
  clients.set('edge-operator', connect(files('operators/edge-ops')));
  clients.set('operator', connect(files('operators/ops')));
  clients.set('admin', admin);
  for (const [name, pool] of [['e1', 'edge'], ['w1', 'worker']] as const) {
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name, pool), name, autoDone: true });
    await agent.connect();
    agents.push(agent);
  }
  await eventually(async () => (await call(admin, admin.status.getNode.bind(admin.status), { name: 'e1' }, 'get')).pool === 'edge', 10_000, 'e1 in pool edge');
  const asked = async (node: string, pool: string): Promise<string> => {
    const r = await requestEnrollment(server, node, pool);
    assert.equal(r.status, 202, JSON.stringify(r.body));
    return r.body.id as string;
  };
  edgeRequest = await asked('new-edge', 'edge');
  workerRequest = await asked('new-worker', 'worker');
});

after(async () => {
  for (const a of agents) a.close();
  for (const [who, c] of clients) if (who !== 'admin') c.close();
  await server.close();
});

/** The calls made of each RPC: a request, and where it lands for the edge operator. */
function cases(): Record<string, { service: ServiceKey; rule: Rule; calls: { request: unknown; scope: Scope }[] }> {
  const none = (request: unknown) => [{ request, scope: 'none' as Scope }];
  const inOut = (inside: unknown, outside: unknown) => [{ request: inside, scope: 'in' as Scope }, { request: outside, scope: 'out' as Scope }];
  const status: Record<keyof typeof STATUS_RULES, { request: unknown; scope: Scope }[]> = {
    ListPools: none({}), GetPool: none({ name: 'edge' }), ListNodes: none({}), GetNode: none({ name: 'e1' }), Watch: none({ pools: true }),
    ListReplicas: none({}), GetServerInfo: none({}), ListEvents: none({}), GetNodeHistory: none({ name: 'e1' }), GetDriftProposal: none({ node: 'e1' }),
    ListMachineConfigNodes: none({ pool: '' }), GetMachineConfigNode: none({ name: 'e1' }),
  };
  const config: Record<keyof typeof CONFIG_RULES, { request: unknown; scope: Scope }[]> = {
    Apply: none({ manifests: [{ source: 'edge.yaml', text: poolYaml('edge') }], dryRun: true }),
    Delete: none({ kind: 'MachineConfig', name: 'ghost' }),
    ListMachineConfigs: none({}), GetMachineConfig: none({ name: 'ghost' }), ListRenderedConfigs: none({ pool: '' }), GetRenderedConfig: none({ name: 'ghost' }),
    SetPoolPaused: inOut({ name: 'edge', paused: false }, { name: 'master', paused: false }),
    ReapplyNode: inOut({ name: 'e1' }, { name: 'w1' }),
    LabelNode: inOut({ name: 'e1', set: { 'example.com/rack': 'r1' }, remove: [] }, { name: 'w1', set: { 'example.com/rack': 'r1' }, remove: [] }),
    ListSourceObjects: none({ kind: 'KubeletConfig' }), GetMachineConfiguration: none({ name: 'cluster' }),
    ConfirmTry: inOut({ kind: 'node', name: 'e1' }, { kind: 'node', name: 'w1' }),
  };
  const identity: Record<keyof typeof IDENTITY_RULES, { request: unknown; scope: Scope }[]> = {
    CreateBootstrapToken: none({ pool: 'edge', ttlMs: 60_000, description: 'roles test' }),
    ListBootstrapTokens: none({}), DeleteBootstrapToken: none({ id: 'abcdef' }), RevokeNode: none({ name: 'ghost' }), ListEnrollmentRequests: none({}),
    ApproveEnrollmentRequest: inOut({ name: edgeRequest }, { name: workerRequest }),
    DenyEnrollmentRequest: inOut({ name: edgeRequest, reason: '' }, { name: workerRequest, reason: '' }),
    ListAuditRecords: none({}),
  };
  const out: ReturnType<typeof cases> = {};
  for (const [service, rules, calls] of [['status', STATUS_RULES, status], ['config', CONFIG_RULES, config], ['identity', IDENTITY_RULES, identity]] as const) {
    for (const [method, rule] of Object.entries(rules)) out[`${service}.${method}`] = { service, rule, calls: (calls as Record<string, { request: unknown; scope: Scope }[]>)[method]! };
  }
  return out;
}

function allowed(who: Who, rule: Rule, scope: Scope): boolean {
  if (who === 'node') return false;
  if (rule.role === 'viewer') return true;
  if (rule.role === 'admin') return who === 'admin';
  if (who === 'viewer') return false;
  return who !== 'edge-operator' || scope === 'in';
}

/** The call's status code: OK (0) or the error's. Watch: its first message, or its error. */
function callCode(c: Clients, service: ServiceKey, method: string, request: unknown): Promise<{ code: number; details: string }> {
  const client = c[service] as unknown as Record<string, (...args: unknown[]) => unknown>;
  if (method === 'Watch') {
    return new Promise((resolve) => {
      const stream = client.Watch!.call(client, request) as NodeJS.EventEmitter & { cancel(): void };
      stream.once('data', () => { resolve({ code: Status.OK, details: '' }); stream.cancel(); });
      stream.once('error', (err: ServiceError) => resolve({ code: err.code, details: err.details }));
    });
  }
  return new Promise((resolve) => {
    client[method]!.call(client, request, (err: ServiceError | null) => resolve(err ? { code: err.code, details: err.details } : { code: Status.OK, details: '' }));
  });
}

test('every RPC of every operator-facing service has a rule, and only those (compared with the loaded proto)', () => {
  const v1 = loadMcplaneProto().grpc.mcplane.v1;
  for (const [name, rules] of [['StatusService', STATUS_RULES], ['ConfigService', CONFIG_RULES], ['IdentityService', IDENTITY_RULES]] as const) {
    assert.deepEqual(Object.keys(rules).sort(), Object.keys(v1[name].service).sort(), `${name}: access-rules.ts and the proto disagree`);
  }
  // Every service the proto declares is either in the tables or the agent's (node-only) one.
  assert.deepEqual(Object.keys(v1).filter((k) => (v1 as Record<string, { service?: unknown }>)[k]!.service).sort(), ['AgentService', 'ConfigService', 'IdentityService', 'StatusService']);
});

test('each role gets PERMISSION_DENIED exactly where its rule says, on every RPC (real gRPC, real certificates)', async () => {
  const table = cases();
  const wrong: string[] = [];
  for (const who of WHO) {
    for (const [name, { service, rule, calls }] of Object.entries(table)) {
      for (const { request, scope } of calls) {
        const { code, details } = await callCode(clients.get(who)!, service, name.split('.')[1]!, request);
        const expected = allowed(who, rule, scope);
        const label = `${who} ${name} (${scope}): ${Status[code]} ${details}`;
        if (expected && code === Status.PERMISSION_DENIED) wrong.push(`allowed but refused: ${label}`);
        if (!expected && code !== Status.PERMISSION_DENIED) wrong.push(`should be refused: ${label}`);
        // An allowed call reached its handler: anything but a transport or authentication failure.
        if (expected && [Status.UNAVAILABLE, Status.UNAUTHENTICATED, Status.UNIMPLEMENTED, Status.INTERNAL].includes(code)) wrong.push(`did not reach the handler: ${label}`);
      }
    }
  }
  assert.deepEqual(wrong, []);
});

test('a pool-scoped operator cannot move a node out of its pool by its labels, nor act on an unknown node', async () => {
  const c = clients.get('edge-operator')!;
  const move = await callCode(c, 'config', 'LabelNode', { name: 'e1', set: { 'node-role.kubernetes.io/master': '' }, remove: ['node-role.kubernetes.io/edge'] });
  assert.equal(move.code, Status.PERMISSION_DENIED);
  assert.match(move.details, /CN=edge-ops.*may act on pool edge only: ConfigService\/LabelNode touches pool master/);
  const ghost = await callCode(c, 'config', 'ReapplyNode', { name: 'ghost' });
  assert.equal(ghost.code, Status.PERMISSION_DENIED);
  assert.match(ghost.details, /cannot be told/);
  // An operator of every pool is told the node does not exist.
  assert.equal((await callCode(clients.get('operator')!, 'config', 'ReapplyNode', { name: 'ghost' })).code, Status.NOT_FOUND);
  const admin = server.admin();
  assert.equal((await call(admin, admin.status.getNode.bind(admin.status), { name: 'e1' }, 'get')).pool, 'edge');
});

test('mcctl pki operator: the role in O, each pool in an OU, under operators/; a pool only for an operator', async () => {
  const subject = new X509Certificate(readFileSync(join(server.pki.dir, 'operators', 'edge-ops.crt'))).subject.split('\n');
  assert.deepEqual(subject, ['CN=edge-ops', 'OU=edge', 'O=mcplane:operators']);
  const two = await runCliAsync(['pki', 'operator', 'two-pools', '--role', 'operator', '--pool', 'edge', '--pool', 'infra', '--pki-dir', server.pki.dir]);
  assert.equal(two.status, 0, two.stderr);
  assert.match(two.stdout, /operators\/two-pools\.crt, two-pools\.key   operator credentials \(CN=two-pools, O=mcplane:operators, OU=edge, OU=infra: pools edge, infra only\)/);
  const viewerPool = await runCliAsync(['pki', 'operator', 'v2', '--role', 'viewer', '--pool', 'edge', '--pki-dir', server.pki.dir]);
  assert.notEqual(viewerPool.status, 0);
  assert.match(viewerPool.stderr, /--pool limits an operator only: a viewer reads every pool/);
  const badRole = await runCliAsync(['pki', 'operator', 'v3', '--role', 'root', '--pki-dir', server.pki.dir]);
  assert.notEqual(badRole.status, 0);
  assert.match(badRole.stderr, /--role.*root.*viewer, operator, admin/);
});

test('the status port (--status-listen, a thread of its own) applies the same rules to every StatusService RPC', async () => {
  const address = `127.0.0.1:${server.handle.statusPort}`;
  const pki = server.pki.dir;
  const node = await server.pki.node('w1');
  const asViewer = connect({ server: address, ca: join(pki, 'ca.crt'), cert: join(pki, 'operators', 'grafana.crt'), key: join(pki, 'operators', 'grafana.key'), config: '/dev/null' });
  const asNode = connect({ server: address, ca: node.ca, cert: node.cert, key: node.key, config: '/dev/null' });
  try {
    for (const [name, { service, calls }] of Object.entries(cases()).filter(([, t]) => t.service === 'status')) {
      const method = name.split('.')[1]!;
      const viewerCode = (await callCode(asViewer, service, method, calls[0]!.request)).code;
      assert.ok(![Status.PERMISSION_DENIED, Status.UNAVAILABLE, Status.UNIMPLEMENTED].includes(viewerCode), `viewer ${method} on the status port: ${Status[viewerCode]}`);
      assert.equal((await callCode(asNode, service, method, calls[0]!.request)).code, Status.PERMISSION_DENIED, `node ${method} on the status port`);
    }
  } finally {
    asViewer.close();
    asNode.close();
  }
});

test('a viewer is told which role a write needs', async () => {
  const denied = await callCode(clients.get('viewer')!, 'config', 'SetPoolPaused', { name: 'edge', paused: true });
  assert.equal(denied.code, Status.PERMISSION_DENIED);
  assert.match(denied.details, /CN=grafana, O=mcplane:viewers is a viewer: ConfigService\/SetPoolPaused needs the operator role \(O=mcplane:operators\)/);
});

test('plaintext mode (loopback only) treats a local caller as admin, and audits it as the local caller', async () => {
  const { startServer } = await import('../../src/controlplane/server.ts');
  const { mkdtempSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { createLogger } = await import('../../src/runtime/logger.ts');
  const plain = await startServer({ dataDir: mkdtempSync(join(tmpdir(), 'mcplane-plain-')), listen: '127.0.0.1:0', insecure: true, log: createLogger({ level: 'warn', write: () => undefined }) });
  const c = connect({ server: `127.0.0.1:${plain.grpcPort}`, insecure: true, config: '/dev/null' });
  try {
    const created = await call(c, c.identity.createBootstrapToken.bind(c.identity), { pool: 'worker', ttlMs: 60_000, description: '' }, 'create token');
    await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: true }, 'pause');
    const records = (await call(c, c.identity.listAuditRecords.bind(c.identity), { sinceUnixMs: 0, limit: 0 }, 'audit')).records;
    assert.deepEqual(records.map((r) => [r.method, r.role, r.subject, r.result]), [
      ['IdentityService/CreateBootstrapToken', 'admin', 'local (plaintext, loopback)', 'OK'],
      ['ConfigService/SetPoolPaused', 'admin', 'local (plaintext, loopback)', 'OK'],
    ]);
    assert.equal(records[0]!.objects[0]!.name, created.info!.id);
  } finally {
    c.close();
    await plain.close(1000);
  }
});
