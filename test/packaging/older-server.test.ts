// Today's agent against an older server, for every recorded protocol fixture. The older server is
// a stand-in: a gRPC server built from the fixture's own proto (@grpc/proto-loader, real mTLS on
// loopback) that answers today's real agent (a sandbox host: its own systemd user manager and the
// rpm-ostree and reboot stand-ins) with the server messages the recorded version's real server
// sent, byte for byte what that schema encodes: registered, the first assignment, the second, the
// forced re-apply command. Today's agent must apply each (the files are on the host) and report
// in a way the old schema decodes: registered as itself, Done on each config, Degraded with the
// drift named, Done again after the re-apply. (The recorded renewal is not replayed: the issued
// certificate is for the recording agent's key.)

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Server, type ServerDuplexStream } from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SERVER_CHANNEL_OPTIONS } from '../../src/runtime/grpc-options.ts';
import { serverCredentials } from '../../src/runtime/tls.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd, startUserSystemd, type UserSystemd } from '../../sandbox/user-systemd.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { testPki } from '../helpers/test-pki.ts';
import { loadGrpc, protocolFixtures } from '../controlplane/protocol-fixtures.ts';

/** A message under an older schema: the generated types are today's. */
type Message = Record<string, any>;

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let systemd: UserSystemd;
before(async () => { if (!skip) systemd = await startUserSystemd(); });
after(async () => { await systemd?.stop(); });

/** The stand-in for an older mcplane-server: AgentService from the old proto, replaying what it recorded. */
async function olderServerStandIn(protoDir: string) {
  const pki = await testPki();
  const old = loadGrpc(protoDir).mcplane.v1;
  const received: Message[] = [];
  let stream: ServerDuplexStream<Message, Message> | undefined;
  const server = new Server(SERVER_CHANNEL_OPTIONS);
  server.addService((old.AgentService as unknown as { service: Parameters<Server['addService']>[0] }).service, {
    Connect(call: ServerDuplexStream<Message, Message>) {
      stream = call;
      call.on('data', (m: Message) => received.push(m));
      call.on('error', () => undefined);
    },
  });
  const tls = { ca: readFileSync(join(pki.dir, 'ca.crt')), cert: readFileSync(join(pki.dir, 'server.crt')), key: readFileSync(join(pki.dir, 'server.key')) };
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', serverCredentials(tls), (err, p) => (err ? reject(err) : resolve(p))));
  return {
    address: `127.0.0.1:${port}`,
    received,
    /** Sends a recorded server message (its JSON under the old schema) on the agent's stream. */
    send(message: Message) { stream!.write(message); },
    close() { server.forceShutdown(); },
  };
}

for (const f of protocolFixtures()) {
  test(`today's agent goes through a whole update with a server of ${f.version} (a stand-in replaying its fixture)`, { skip }, async () => {
    const standIn = await olderServerStandIn(f.protoDir);
    const NODE = 'today-agent';
    const host = new SandboxHost({ name: NODE, server: standIn.address, pki: await testPki(), systemd, config: { heartbeatSeconds: 1 } });
    const recorded = f.messages.filter((m) => m.stream === 1 && m.from === 'server');
    const registered = recorded.find((m) => m.kind === 'registered')!.json;
    const [firstAssignment, secondAssignment] = recorded.filter((m) => m.kind === 'assignment').map((m) => m.json);
    const command = recorded.find((m) => m.kind === 'command')!.json;
    const reports = () => standIn.received.filter((m) => m.message === 'status').map((m) => m.status.status);
    const reported = async (what: string, predicate: (s: Message) => boolean, from = 0) => {
      await eventually(async () => { await host.rebootIfRequested(); return reports().slice(from).some(predicate); }, 20_000, `today's agent reporting ${what}`)
        .catch((err: Error) => { throw new Error(`${err.message}; it reported ${JSON.stringify(reports().slice(-3).map((s) => [s.state, s.phase, s.currentConfig, s.reason]))}\n${host.logs.slice(-10).join('\n')}`); });
      return reports().length;
    };
    const motd = (assignment: Message) => {
      const file = JSON.parse(assignment.assignment.specJson).config.storage.files.find((x: { path: string }) => x.path === '/etc/demo/motd');
      const source = file.contents.source as string;
      const [header, data] = [source.slice(0, source.indexOf(',')), source.slice(source.indexOf(',') + 1)];
      return header.endsWith(';base64') ? Buffer.from(data, 'base64').toString('utf8') : decodeURIComponent(data);
    };
    try {
      await host.start();
      await eventually(() => standIn.received.length > 0, 20_000, 'today\'s agent registering with the stand-in');
      const [first] = standIn.received;
      assert.equal(first!.message, 'register', 'the first message on the stream registers');
      assert.equal(first!.register.nodeName, NODE);
      assert.deepEqual(first!.register.labels, { 'node-role.kubernetes.io/worker': '' });
      assert.ok(first!.register.agentVersion, 'the old schema reads the agent version');
      assert.ok(first!.register.bootId);

      standIn.send(registered);
      standIn.send(firstAssignment!);
      const [configA, configB] = f.configs as [string, string];
      let seen = await reported(`Done on ${configA}`, (s) => s.state === 'Done' && s.currentConfig === configA);
      assert.equal(host.file('etc/demo/motd'), motd(firstAssignment!));
      assert.ok(reports().some((s) => s.state === 'Working' && s.desiredConfig === configA), 'Working reported on the way');

      standIn.send(secondAssignment!);
      seen = await reported(`Done on ${configB}`, (s) => s.state === 'Done' && s.currentConfig === configB, seen);
      assert.equal(host.file('etc/demo/motd'), motd(secondAssignment!));
      const done = reports().at(-1)!;
      assert.equal(done.lastUpdate.toConfig, configB);
      assert.equal(done.lastUpdate.result, 'Done');
      assert.ok(done.lastUpdate.phases.length > 0);
      // Every second (heartbeatSeconds: 1); both updates may be done within the first.
      await eventually(() => standIn.received.some((m) => m.message === 'heartbeat'), 5_000, 'a heartbeat the old schema decodes');

      host.systemd.systemctl('disable', 'demo.service');
      seen = await reported('drift', (s) => s.state === 'Degraded' && s.drift.some((d: Message) => d.kind === 'unit' && d.path === 'demo.service'), seen);
      standIn.send(command);
      await reported(`Done on ${configB} again after the forced re-apply`, (s) => s.state === 'Done' && s.currentConfig === configB && s.drift.length === 0, seen);
      assert.equal(host.systemd.systemctl('is-enabled', 'demo.service').stdout.trim(), 'enabled');
    } finally {
      await host.stop();
      standIn.close();
    }
  });
}
