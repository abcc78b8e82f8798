// Records a protocol fixture for this version (package.json's), for the mixed-version tests
// (test/controlplane/protocol-compat, older-agent and older-store, test/packaging/older-server;
// docs/upgrade.md): run it at release time, as root (the agent needs a systemd user manager), and
// commit test/fixtures/protocol/<version>/.
//
//   node --import tsx scripts/record-protocol-fixture.ts [--version X.Y.Z] [--out DIR]
//
// It snapshots proto/mcplane/v1/*.proto, then runs today's server (in this process: gRPC over
// loopback mTLS, SQLite) and today's agent (a sandbox host: a real mcplane-agent process with a
// systemd user manager and the rpm-ostree and reboot stand-ins) through a whole update flow:
// register, an assignment applied to Done, heartbeats, a second config, drift, a forced
// re-apply, a certificate renewal and the stream that renewal opens. Every message on the agent
// streams is taken off the wire at the server (both directions, as bytes), and written as JSON
// decoded with the snapshot's own schema (protobufjs toObject), with the bytes beside it. Later
// versions replay these against their own server and agent: tests never need git history.
// It also writes a backup of the server's store (`mcplane-server backup`'s format) as it was at
// the end of the flow, which later servers must open.

import { Server, type ServerDuplexStream, type ServiceDefinition } from '@grpc/grpc-js';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import protobuf from 'protobufjs';
import { call } from '../src/cli/client/call.ts';
import { runBackup } from '../src/controlplane/backup-command.ts';
import { SandboxHost } from '../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../sandbox/user-systemd.ts';
import { untilNode } from '../test/helpers/converge.ts';
import { demoServiceConfig, poolYaml } from '../test/helpers/manifests.ts';
import { startTestServer } from '../test/helpers/test-server.ts';

const ROOT = join(import.meta.dirname, '..');
const { values: args } = parseArgs({ options: { version: { type: 'string' }, out: { type: 'string' } } });
const version = args.version ?? (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const out = args.out ?? join(ROOT, 'test/fixtures/protocol', version);

if (!canRunUserSystemd()) {
  console.error('record-protocol-fixture: needs root (a systemd user manager for the real agent)');
  process.exit(1);
}

/** One message on an agent stream, as the wire carried it. */
interface Tapped { stream: number; from: 'agent' | 'server'; bytes: Buffer; at: number }
const tapped: Tapped[] = [];
let streams = 0;

// The tap: every Server this process creates wraps AgentService.Connect's (de)serializers, so
// what is recorded is the bytes that crossed the wire. A decoded agent message carries its bytes
// (under a symbol) to the stream's 'data' event, and a server message is marked by the stream
// that writes it, so each is recorded with the stream it travelled on, in the order seen.
const WIRE = Symbol('wire');
const addService = Server.prototype.addService;
Server.prototype.addService = function (this: Server, service: ServiceDefinition, implementation: Parameters<Server['addService']>[1]) {
  const connect = service.Connect;
  if (!connect || connect.path !== '/mcplane.v1.AgentService/Connect') return addService.call(this, service, implementation);
  const streamOf = new WeakMap<object, number>();
  const wrapped: ServiceDefinition = {
    ...service,
    Connect: {
      ...connect,
      requestDeserialize: (bytes: Buffer) => Object.defineProperty(connect.requestDeserialize(bytes) as object, WIRE, { value: Buffer.from(bytes) }),
      responseSerialize: (value: unknown) => {
        const bytes = connect.responseSerialize(value);
        tapped.push({ stream: streamOf.get(value as object) ?? 0, from: 'server', bytes: Buffer.from(bytes), at: Date.now() });
        return bytes;
      },
    },
  };
  const impl = implementation as Record<string, (call: ServerDuplexStream<unknown, unknown>) => void>;
  return addService.call(this, wrapped, {
    ...impl,
    Connect: (c: ServerDuplexStream<unknown, unknown>) => {
      const id = ++streams;
      c.prependListener('data', (m: { [WIRE]?: Buffer }) => { tapped.push({ stream: id, from: 'agent', bytes: m[WIRE]!, at: Date.now() }); });
      const write = c.write.bind(c) as (...a: unknown[]) => boolean;
      c.write = ((value: object, ...rest: unknown[]) => { streamOf.set(value, id); return write(value, ...rest); }) as typeof c.write;
      impl.Connect!(c);
    },
  });
};

const pool = poolYaml('worker', `  disruptionPolicy:
    files:
      - {path: /etc/demo/, actions: [{type: restart, unit: demo.service}]}
    units:
      - {name: demo.service, actions: [{type: daemon-reload}, {type: restart, unit: demo.service}]}
`);
const manifests = [pool, demoServiceConfig('hello from the fixture', { sshKey: 'ssh-ed25519 AAAA fixture' }), demoServiceConfig('changed by the fixture', { sshKey: 'ssh-ed25519 AAAA fixture' })];
const NODE = 'fixture-node';

const server = await startTestServer({ signing: true });
const c = server.admin();
// A certificate that lives 12 s: the agent renews it at two thirds of its life, inside the flow.
const shortLived = await server.pki.shortLivedNode(NODE, 12_000);
const host = new SandboxHost({ name: NODE, server: server.address, pki: { node: async () => shortLived }, config: { heartbeatSeconds: 1 } });
const apply = (text: string) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'fixture.yaml', text }], dryRun: false }, 'apply');
const target = async () => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
const done = (want: string) => untilNode(c, [host], NODE, (n) => n.status!.currentConfig === want && n.status!.state === 'Done' && n.status!.drift.length === 0);
const has = (from: Tapped['from'], kind: string) => () => tapped.some((t) => t.from === from && kindOf(t) === kind);
const until = async (what: string, predicate: () => boolean, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`record-protocol-fixture: ${what} did not happen within ${timeoutMs} ms\n${host.logs.slice(-20).join('\n')}`);
    await host.rebootIfRequested();
    await new Promise((r) => setTimeout(r, 50));
  }
};

// The snapshot first: the JSON below is decoded with it.
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'proto/mcplane/v1'), { recursive: true });
for (const f of readdirSync(join(ROOT, 'proto/mcplane/v1')).filter((f) => f.endsWith('.proto'))) copyFileSync(join(ROOT, 'proto/mcplane/v1', f), join(out, 'proto/mcplane/v1', f));
const root = new protobuf.Root();
root.resolvePath = (_origin, target) => join(out, 'proto', target);
root.loadSync(['mcplane/v1/agent.proto', 'mcplane/v1/status.proto', 'mcplane/v1/config.proto', 'mcplane/v1/identity.proto']);
const AgentMessage = root.lookupType('mcplane.v1.AgentMessage');
const ServerMessage = root.lookupType('mcplane.v1.ServerMessage');
const TO_OBJECT: protobuf.IConversionOptions = { longs: String, enums: String, oneofs: true };
function decode(t: Tapped): Record<string, unknown> {
  const type = t.from === 'agent' ? AgentMessage : ServerMessage;
  return type.toObject(type.decode(t.bytes), TO_OBJECT);
}
function kindOf(t: Tapped): string {
  return decode(t).message as string;
}

try {
  await apply(pool);
  await apply(manifests[1]!);
  const first = await target();
  await host.start();
  await done(first);
  await until('a heartbeat', has('agent', 'heartbeat'));

  await apply(manifests[2]!);
  const second = await target();
  await done(second);

  host.systemd.systemctl('disable', 'demo.service');
  await untilNode(c, [host], NODE, (n) => n.status!.state === 'Degraded' && n.status!.drift.length > 0);
  await call(c, c.config.reapplyNode.bind(c.config), { name: NODE }, 'reapply');
  await done(second);

  await until('a certificate renewal', has('server', 'certificate'));
  // The renewed certificate's stream registers: the old stream ends once it has.
  await until('the renewed stream registering', () => tapped.some((t) => t.stream > 1 && t.from === 'server' && kindOf(t) === 'registered'));
  await until('a heartbeat on the renewed stream', () => tapped.some((t) => t.stream > 1 && t.from === 'agent' && kindOf(t) === 'heartbeat'));

  const messages = tapped.map((t) => ({ stream: t.stream, from: t.from, kind: kindOf(t), json: decode(t), wire: t.bytes.toString('base64') }));
  const kinds = (from: Tapped['from']) => [...new Set(messages.filter((m) => m.from === from).map((m) => m.kind))].sort();
  writeFileSync(join(out, 'agent-streams.json'), JSON.stringify({
    version,
    recordedAt: new Date().toISOString(),
    node: NODE,
    configs: [first, second],
    agentKinds: kinds('agent'),
    serverKinds: kinds('server'),
    messages,
  }, null, 1) + '\n');
  writeFileSync(join(out, 'manifests.yaml'), manifests.join('---\n'));

  // The store as this version leaves it, in the backup format (`mcplane-server backup`), and what
  // this server served from it: a later server must open the file and serve the same objects.
  console.log(await runBackup({ dataDir: server.dataDir, to: join(out, 'store.db') }));
  const pools = (await call(c, c.status.listPools.bind(c.status), {}, 'list pools')).pools;
  const nodes = (await call(c, c.status.listNodes.bind(c.status), {}, 'list nodes')).nodes;
  const configs = (await call(c, c.config.listMachineConfigs.bind(c.config), {}, 'list configs')).machineConfigs;
  const rendered = (await call(c, c.config.listRenderedConfigs.bind(c.config), {}, 'list rendered')).renderedConfigs;
  writeFileSync(join(out, 'store.json'), JSON.stringify({
    pools: pools.map((p) => ({ name: p.name, configuration: p.status!.configuration, machineCount: p.status!.machineCount, updatedMachineCount: p.status!.updatedMachineCount })),
    machineConfigs: configs.map((m) => m.name),
    renderedConfigs: rendered.map((r) => r.name),
    nodes: nodes.map((n) => ({ name: n.name, pool: n.pool, currentConfig: n.status!.currentConfig, desiredConfig: n.status!.desiredConfig, state: n.status!.state, agentVersion: n.status!.agentVersion })),
  }, null, 1) + '\n');
  console.log(`recorded ${messages.length} messages (agent: ${kinds('agent').join(', ')}; server: ${kinds('server').join(', ')}) into ${out}`);
} finally {
  await host.stop();
  await server.close();
}
