// Several control plane addresses: when the stream is lost, the agent reconnects to the next one
// and registers again with its full status. The control plane is being rebuilt for replicas, so
// the two servers here are STAND-INS: plain grpc-js servers over loopback mutual TLS implementing
// AgentService from the real proto, recording what the agent sends and answering Register.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { loadMcplaneProto } from '../../src/runtime/proto.ts';
import type { AgentMessage__Output } from '../../src/runtime/generated/mcplane/v1/AgentMessage.ts';
import type { ServerMessage } from '../../src/runtime/generated/mcplane/v1/ServerMessage.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { testPki, type TestPki } from '../helpers/test-pki.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';

/** STAND-IN control plane replica: AgentService.Connect only. */
class StandInReplica {
  readonly received: AgentMessage__Output[] = [];
  readonly streams: ServerDuplexStream<AgentMessage__Output, ServerMessage>[] = [];
  readonly server = new Server();
  port = 0;

  constructor(readonly name: string, private readonly onRegister?: (call: ServerDuplexStream<AgentMessage__Output, ServerMessage>) => void) {
    const { grpc } = loadMcplaneProto();
    this.server.addService(grpc.mcplane.v1.AgentService.service, {
      connect: (call: ServerDuplexStream<AgentMessage__Output, ServerMessage>) => {
        this.streams.push(call);
        call.on('data', (m: AgentMessage__Output) => {
          this.received.push(m);
          if (m.register) {
            call.write({ registered: { pool: 'worker' } });
            this.onRegister?.(call);
          }
        });
        call.on('error', () => undefined);
        call.on('end', () => call.end());
      },
    });
  }

  async listen(pki: TestPki): Promise<void> {
    const file = (f: string) => readFileSync(join(pki.dir, f));
    const creds = ServerCredentials.createSsl(file('ca.crt'), [{ cert_chain: file('server.crt'), private_key: file('server.key') }], true);
    this.port = await new Promise<number>((resolve, reject) => this.server.bindAsync('127.0.0.1:0', creds, (err, port) => (err ? reject(err) : resolve(port))));
  }

  get registrations() {
    return this.received.filter((m) => m.register).map((m) => m.register!);
  }

  /** Gone at once, streams and all, as a replica whose machine dies. */
  kill(): void {
    this.server.forceShutdown();
  }
}

let pki: TestPki;
let host: SandboxHost | undefined;
const replicas: StandInReplica[] = [];

before(async () => {
  if (skip) return;
  pki = await testPki();
});
after(async () => {
  if (skip) return;
  await host?.stop();
  for (const r of replicas) r.kill();
});

test('server: "a,b": the first replica is lost mid-session; the agent re-registers on the second within seconds with its full status', { skip, timeout: 60_000 }, async () => {
  // The first replica assigns a config (nothing in it needs a reboot), so there is status to carry.
  const first = new StandInReplica('first', (call) => call.write({
    assignment: { renderedConfig: 'rendered-worker-standin', specJson: JSON.stringify({ config: { ignition: { version: '3.4.0' } } }), pool: 'worker', disruptionPolicyJson: '', driftPolicy: 'Degrade' },
  }));
  const second = new StandInReplica('second');
  replicas.push(first, second);
  await first.listen(pki);
  await second.listen(pki);

  host = new SandboxHost({ name: 'two-servers', server: `127.0.0.1:${first.port},127.0.0.1:${second.port}`, pki });
  await host.start();
  await eventually(() => first.received.some((m) => m.status?.status?.state === 'Done' && m.status.status.currentConfig === 'rendered-worker-standin'), 20_000);
  assert.equal(first.registrations.length, 1);
  assert.equal(second.registrations.length, 0, 'the first address is tried first');

  const lostAt = Date.now();
  first.kill();
  await eventually(() => second.registrations.length === 1, 10_000);
  const elapsed = Date.now() - lostAt;
  assert.ok(elapsed < 5000, `re-registered on the second replica after ${elapsed} ms`);
  const reg = second.registrations[0]!;
  assert.equal(reg.nodeName, 'two-servers');
  assert.equal(reg.bootId, readFileSync(host.bootIdFile, 'utf8').trim());
  assert.deepEqual(reg.labels, { 'node-role.kubernetes.io/worker': '' });
  assert.equal(reg.status!.currentConfig, 'rendered-worker-standin', 'the full status travels with the new registration');
  assert.equal(reg.status!.state, 'Done');
  assert.ok(reg.status!.os!.kernelArguments.includes('root=UUID=standin'));
  assert.ok(host.logs.some((l) => l.includes('"msg":"control plane stream lost; reconnecting"') && l.includes(`"next":"127.0.0.1:${second.port}"`)));
  // The agent says so once the stand-in's answer to the registration arrives, a moment later.
  await eventually(() => host!.logs.some((l) => l.includes('"msg":"connected to the control plane"') && l.includes(`"server":"127.0.0.1:${second.port}"`)), 5000);
});
