// Several control plane addresses: when the stream is lost, the agent reconnects to the next one
// and registers again with its full status. The control plane is being rebuilt for replicas, so
// the two servers here are STAND-INS: plain grpc-js servers over loopback mutual TLS implementing
// AgentService from the real proto, recording what the agent sends and answering Register.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { StandInReplica } from '../helpers/stand-in-replica.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { testPki, type TestPki } from '../helpers/test-pki.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';

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
