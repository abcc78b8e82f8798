// An older agent against today's server, for every recorded protocol fixture: a replay client
// built from the fixture's own proto (@grpc/proto-loader, as that version's agent was) plays the
// agent messages the recorded version's real agent sent in a whole update flow, over real mTLS on
// loopback, to today's real server. Today's server must accept each message and answer with what
// the old agent waits for, decodable under the old schema (registered, an assignment for each
// config, the forced re-apply command, the renewed certificate), and the node must be seen Done on
// each config, Degraded on drift, through StatusService read with the old schema too (an old
// mcctl). The renewed certificate then opens a second stream, as the old agent's did.

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { ClientDuplexStream, ServiceError } from '@grpc/grpc-js';
import { CLIENT_CHANNEL_OPTIONS } from '../../src/runtime/grpc-options.ts';
import { createCertificateRequest } from '../../src/runtime/pki.ts';
import { clientCredentials } from '../../src/runtime/tls.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { loadGrpc, protocolFixtures, type ProtocolFixture } from './protocol-fixtures.ts';

/** A message under an older schema: the generated types are today's. */
type Message = Record<string, any>;
type Unary = (request: Message, callback: (err: ServiceError | null, response: Message) => void) => void;
type GrpcClient = Record<string, Unary> & { close(): void; Connect(): ClientDuplexStream<Message, Message> };
type ClientConstructor = new (address: string, credentials: unknown, options: object) => GrpcClient;

let server: TestServer;
before(async () => { server = await startTestServer({ signing: true }); });
after(async () => { await server.close(); });

/** Every string in `value` with each recorded name replaced by the live one. */
function rewrite<T>(value: T, names: Map<string, string>): T {
  if (typeof value === 'string') return [...names].reduce((s, [from, to]) => s.split(from).join(to), value as string) as T;
  if (Array.isArray(value)) return value.map((v) => rewrite(v, names)) as T;
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [rewrite(k, names), rewrite(v, names)])) as T;
  return value;
}

/** An agent stream, with what the server sent on it and a cursor for what the replay has consumed. */
function openStream(client: GrpcClient) {
  const received: Message[] = [];
  let cursor = 0;
  let ended: string | undefined;
  const stream = client.Connect();
  stream.on('data', (m: Message) => received.push(m));
  stream.on('error', (err: ServiceError) => { ended = `${err.code} ${err.details}`; });
  stream.on('end', () => { ended ??= 'end'; });
  return {
    stream,
    received,
    get ended() { return ended; },
    /** The next message of `kind` the server sent after the last one consumed. */
    async next(kind: string): Promise<Message> {
      let found: Message | undefined;
      await eventually(() => {
        if (ended) throw new Error(`today's server ended the stream (${ended}) while the replay waited for ${kind}; it sent ${received.map((m) => m.message).join(', ')}`);
        const i = received.findIndex((m, j) => j >= cursor && m.message === kind);
        if (i >= 0) { found = received[i]; cursor = i + 1; }
        return found !== undefined;
      }, 10_000, `a ${kind} from today's server`);
      return found!;
    },
  };
}

for (const f of protocolFixtures()) {
  test(`an agent of ${f.version} (replayed from its fixture) goes through a whole update with today's server`, async () => {
    const old = loadGrpc(f.protoDir).mcplane.v1;
    const NODE = `agent-${f.version.replaceAll('.', '-')}`;
    const files = await server.pki.node(NODE);
    const tls = { ca: readFileSync(files.ca), cert: readFileSync(files.cert), key: readFileSync(files.key) };
    const admin = { ca: readFileSync(join(server.pki.dir, 'ca.crt')), cert: readFileSync(join(server.pki.dir, 'admin.crt')), key: readFileSync(join(server.pki.dir, 'admin.key')) };
    const clients: GrpcClient[] = [];
    const client = (service: string, material = tls) => {
      const c = new (old[service] as unknown as ClientConstructor)(server.address, clientCredentials(material), CLIENT_CHANNEL_OPTIONS);
      clients.push(c);
      return c;
    };
    const unary = (c: GrpcClient, method: string, request: Message) => new Promise<Message>((resolve, reject) => c[method]!(request, (err, res) => (err ? reject(err) : resolve(res))));
    const status = client('StatusService', admin);
    const config = client('ConfigService', admin);
    const getNode = () => unary(status, 'GetNode', { name: NODE });
    const apply = (text: string) => unary(config, 'Apply', { manifests: [{ source: `fixture-${f.version}.yaml`, text }], dryRun: false });
    const nodeIs = async (what: string, predicate: (n: Message) => boolean) => {
      let last: Message | undefined;
      await eventually(async () => predicate(last = await getNode().catch(() => undefined) ?? {}), 10_000, `${NODE} ${what}`).catch((err: Error) => {
        throw new Error(`${err.message}; last status ${JSON.stringify(last?.status)}`);
      });
      return last!;
    };

    try {
      // The flow as recorded: the pool and the first config, then the agent.
      const [pool, first, second] = f.manifests as [string, string, string];
      await apply(pool);
      await apply(first);
      const names = new Map([[f.node, NODE]]);
      const live: string[] = [];
      let s = openStream(client('AgentService'));
      let renewedKey: string | undefined;
      for (const streamId of [1, 2]) {
        if (streamId === 2) {
          // The renewed certificate opens the second stream, as the old agent did.
          const issued = s.received.find((m) => m.message === 'certificate')!.certificate;
          s = openStream(client('AgentService', { ca: Buffer.from(issued.caBundlePem), cert: Buffer.from(issued.certificatePem), key: Buffer.from(renewedKey!) }));
        }
        for (const m of f.messages.filter((x) => x.stream === streamId)) {
          if (m.from === 'agent') {
            let message = rewrite(m.json, names);
            if (m.kind === 'renew') {
              // Today's server signs the key in the request: the replay asks for its own key's.
              const csr = await createCertificateRequest(NODE);
              renewedKey = csr.keyPem;
              message = { renew: { csrPem: csr.csrPem } };
            }
            if (m.kind === 'status' && m.json.status.status.phase === 'drift') {
              s.stream.write(message);
              const drifted = await nodeIs('Degraded on drift', (n) => n.status?.state === 'Degraded' && n.status.drift.length > 0);
              assert.equal(drifted.status.phase, 'drift');
              continue;
            }
            s.stream.write(message);
            continue;
          }
          // A server message: wait for today's server's counterpart, and check it says what the
          // old agent needs from it.
          if (m.kind === 'registered') {
            assert.equal((await s.next('registered')).registered.pool, m.json.registered.pool);
          } else if (m.kind === 'assignment') {
            const recorded = m.json.assignment.renderedConfig as string;
            const index = f.configs.indexOf(recorded);
            if (streamId === 1 && index === 1 && live.length === 1) {
              // The recorded flow's second config came from an apply after the node was Done on the first.
              await nodeIs(`Done on ${live[0]}`, (n) => n.status?.state === 'Done' && n.status.currentConfig === live[0]);
              await apply(second);
            }
            const { assignment } = await s.next('assignment');
            assert.match(assignment.renderedConfig, /^rendered-worker-[0-9a-f]+$/);
            assert.equal(assignment.pool, m.json.assignment.pool);
            assert.equal(assignment.driftPolicy, m.json.assignment.driftPolicy);
            const spec = JSON.parse(assignment.specJson);
            assert.deepEqual(spec.config.storage.files.map((x: { path: string }) => x.path), JSON.parse(m.json.assignment.specJson).config.storage.files.map((x: { path: string }) => x.path));
            assert.deepEqual(JSON.parse(assignment.disruptionPolicyJson || 'null'), JSON.parse(m.json.assignment.disruptionPolicyJson || 'null'));
            names.set(recorded, assignment.renderedConfig);
            if (!live.includes(assignment.renderedConfig)) live.push(assignment.renderedConfig);
          } else if (m.kind === 'command') {
            await unary(config, 'ReapplyNode', { name: NODE });
            const { command } = await s.next('command');
            assert.equal(command.command, 'forceReapply');
            assert.ok(command.forceReapply.requestedBy);
          } else if (m.kind === 'certificate') {
            const { certificate } = await s.next('certificate');
            assert.match(new X509Certificate(certificate.certificatePem).subject, new RegExp(`CN=${NODE}`));
            assert.match(certificate.caBundlePem, /BEGIN CERTIFICATE/);
          } else {
            assert.fail(`the replay does not know the server message ${m.kind} yet: teach it what the old agent waits for`);
          }
        }
      }
      assert.equal(live.length, 2, 'an assignment for each of the recorded configs');
      const node = await nodeIs(`Done on ${live[1]}, on the renewed certificate's stream`, (n) => n.status?.state === 'Done' && n.status.currentConfig === live[1] && n.status.connected);
      const register = f.messages.find((m) => m.kind === 'register')!.json.register;
      assert.equal(node.status.agentVersion, register.agentVersion);
      assert.equal(node.pool, 'worker');
      const history = await unary(status, 'GetNodeHistory', { name: NODE });
      assert.ok(history.updates.some((u: Message) => u.toConfig === live[1] && u.result === 'Done'), JSON.stringify(history.updates));
    } finally {
      for (const c of clients) c.close();
    }
  });
}
