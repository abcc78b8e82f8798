// Every assignment the agent receives is checked before it is used: a malformed spec, health
// check, disruption policy or drift policy leaves the host alone and makes the node Degraded with
// the part, field and rule, never a crash. The control plane never sends such a thing, so the
// server here is a STAND-IN: a plain grpc-js server over loopback mutual TLS implementing
// AgentService from the real proto, which sends what the test tells it to.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { loadMcplaneProto } from '../../src/runtime/proto.ts';
import type { AgentMessage__Output } from '../../src/runtime/generated/mcplane/v1/AgentMessage.ts';
import type { ServerMessage } from '../../src/runtime/generated/mcplane/v1/ServerMessage.ts';
import type { NodeStatus__Output } from '../../src/runtime/generated/mcplane/v1/NodeStatus.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { testPki, type TestPki } from '../helpers/test-pki.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';

let pki: TestPki;
let host: SandboxHost | undefined;
const server = new Server();
let stream: ServerDuplexStream<AgentMessage__Output, ServerMessage> | undefined;
let last: NodeStatus__Output | undefined;
let port = 0;

const SPEC = JSON.stringify({ config: { ignition: { version: '3.4.0' }, storage: { files: [{ path: '/etc/valid.conf', contents: { source: 'data:,valid' } }] } } });
const assign = (name: string, fields: Record<string, string | string[]>) => stream!.write({
  assignment: { renderedConfig: name, specJson: SPEC, pool: 'worker', disruptionPolicyJson: '', driftPolicy: 'Degrade', healthCheckJson: '', ...fields },
});

before(async () => {
  if (skip) return;
  pki = await testPki();
  const { grpc } = loadMcplaneProto();
  server.addService(grpc.mcplane.v1.AgentService.service, {
    connect: (call: ServerDuplexStream<AgentMessage__Output, ServerMessage>) => {
      call.on('data', (m: AgentMessage__Output) => {
        if (m.register) {
          stream = call;
          call.write({ registered: { pool: 'worker' } });
          if (m.register.status) last = m.register.status;
        }
        if (m.status?.status) last = m.status.status;
      });
      call.on('error', () => undefined);
      call.on('end', () => call.end());
    },
  });
  const file = (f: string) => readFileSync(join(pki.dir, f));
  const creds = ServerCredentials.createSsl(file('ca.crt'), [{ cert_chain: file('server.crt'), private_key: file('server.key') }], true);
  port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', creds, (err, p) => (err ? reject(err) : resolve(p))));
  host = new SandboxHost({ name: 'malformed', server: `127.0.0.1:${port}`, pki });
  await host.start();
  await eventually(() => stream !== undefined, 20_000, 'registered');
});
after(async () => {
  if (skip) return;
  await host?.stop();
  server.forceShutdown();
});

const cases: [string, Record<string, string | string[]>, RegExp][] = [
  ['a disruption policy that is not JSON', { disruptionPolicyJson: '{"files": [' }, /^check: rendered-bad-1: the assignment's disruption policy is invalid: disruptionPolicy: the assignment's disruption policy is not JSON: /],
  ['a disruption policy with an unknown action', { disruptionPolicyJson: JSON.stringify({ files: [{ path: '/etc/', actions: [{ type: 'explode' }] }] }) },
    /^check: rendered-bad-2: the assignment's disruption policy is invalid: disruptionPolicy\.files\[0\]\.actions\[0\]\.type: action type "explode" is not one of none, reload, restart, daemon-reload, drain, reboot$/],
  ['a disruption policy that is a list', { disruptionPolicyJson: '[]' }, /^check: rendered-bad-3: the assignment's disruption policy is invalid: disruptionPolicy: must be an object, got /],
  ['an unknown drift policy', { driftPolicy: 'Sometimes' }, /^check: rendered-bad-4: the assignment's drift policy is invalid: driftPolicy: driftPolicy "Sometimes" is not one of Degrade, Reconcile, Adopt$/],
  ['a spec that is not JSON', { specJson: '{' }, /^check: rendered-bad-5: the assignment is not a valid rendered config: spec: the assignment's spec is not JSON: /],
  ['a health check with a bad timeout', { healthCheckJson: JSON.stringify({ units: ['a.service'], timeout: 'soon' }) }, /^check: rendered-bad-6: the assignment's health check is invalid: healthCheck\.timeout: /],
  ['a driftIgnore entry that is not an absolute path', { driftIgnore: ['/etc/ok', 'etc/motd'] }, /^check: rendered-bad-7: the assignment's driftIgnore is invalid: driftIgnore\[1\]: "etc\/motd" is not an absolute path/],
  ['a try with a check of no known kind', { tryJson: JSON.stringify({ timeout: '5m', checks: [{ ping: '10.0.0.1' }] }) }, /^check: rendered-bad-8: the assignment's try is invalid: try\.checks\[0\]\.ping: unknown field "ping" \(expected one of: tcp, https, unit, command, controlPlane\); try\.checks\[0\]: each check names exactly one of tcp, https, unit, command, controlPlane, got none$/],
];

for (const [i, [what, fields, reason]] of cases.entries()) {
  test(`${what}: Degraded naming the field and the rule; the host is left alone and the agent runs on`, { skip }, async () => {
    const name = `rendered-bad-${i + 1}`;
    assign(name, fields);
    await eventually(() => last?.state === 'Degraded' && last.reason.includes(name), 10_000, `Degraded on ${name}`);
    assert.equal(last!.phase, 'check');
    assert.match(last!.reason, reason);
    assert.ok(host!.alive, 'the agent did not crash');
    assert.equal(host!.file('etc/valid.conf'), undefined, 'nothing was applied');
  });
}

test('the next valid assignment clears it: Done, with its policy used (no reboot) and an empty drift policy read as Degrade', { skip }, async () => {
  // A valid policy (mcplane's spelling, as the control plane writes it) is taken as it is: no reboot.
  assign('rendered-good', { disruptionPolicyJson: JSON.stringify({ files: [{ path: '/etc/', actions: [{ type: 'none' }] }] }), driftPolicy: '' });
  await eventually(() => last?.state === 'Done' && last.currentConfig === 'rendered-good', 20_000, 'Done on rendered-good');
  assert.equal(last!.reason, '');
  assert.equal(host!.file('etc/valid.conf'), 'valid');
  assert.equal(host!.reboots, 0);
});
