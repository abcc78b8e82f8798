// Today's proto against every recorded protocol fixture's (test/fixtures/protocol/<version>/proto):
// nothing a peer built from an older version relies on may break (buf's WIRE_JSON rules), and the
// bytes that older agents and servers really sent decode under today's schema to what they meant.
// Mutated copies of today's proto show the check fails on each kind of break.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { breakingChanges, loadRoot, protocolFixtures, protoTexts, rootFromTexts, TODAY_PROTO_DIR } from './protocol-fixtures.ts';

const fixtures = protocolFixtures();
const today = protoTexts(TODAY_PROTO_DIR);

test('there is a fixture for at least one version', () => {
  assert.ok(fixtures.length > 0, 'test/fixtures/protocol holds no fixture: run scripts/record-protocol-fixture.ts');
});

for (const f of fixtures) {
  test(`${f.version}: today's proto keeps every message, field number, name, type, enum number and method of ${f.version}'s`, () => {
    assert.deepEqual(breakingChanges(rootFromTexts(protoTexts(f.protoDir)), rootFromTexts(today)), []);
  });

  test(`${f.version}: the fixture recorded every kind of message on the agent stream but RenewalFailed`, () => {
    const root = loadRoot(f.protoDir);
    const cases = (type: string) => root.lookupType(type).oneofs!.message!.oneof.slice().sort();
    assert.deepEqual(f.agentKinds, cases('mcplane.v1.AgentMessage'));
    // A refused renewal needs a replica without the CA key; the flow has one replica, with it.
    assert.deepEqual(f.serverKinds, cases('mcplane.v1.ServerMessage').filter((k) => k !== 'renewalFailed'));
  });

  test(`${f.version}: every recorded message decodes under today's schema to what it said under ${f.version}'s`, () => {
    const root = loadRoot(TODAY_PROTO_DIR);
    for (const [i, m] of f.messages.entries()) {
      const type = root.lookupType(m.from === 'agent' ? 'mcplane.v1.AgentMessage' : 'mcplane.v1.ServerMessage');
      const decoded = type.toObject(type.decode(Buffer.from(m.wire, 'base64')), { longs: String, enums: String, oneofs: true });
      assert.deepEqual(decoded, m.json, `message ${i} (${m.from} ${m.kind})`);
    }
  });
}

// The check itself, on mutated copies of today's proto: each edit must be reported.
const edit = (file: string, from: string, to: string): Record<string, string> => {
  const path = `mcplane/v1/${file}`;
  assert.ok(today[path]!.includes(from), `${path} no longer contains ${JSON.stringify(from)}: update this test`);
  return { ...today, [path]: today[path]!.replace(from, to) };
};
const problems = (next: Record<string, string>) => breakingChanges(rootFromTexts(today), rootFromTexts(next));

test('a renumbered field is a break: the old number is gone unreserved', () => {
  const found = problems(edit('agent.proto', 'string node_name = 1;', 'string node_name = 9;'));
  assert.deepEqual(found, [
    'mcplane.v1.Register.node_name = 1: renumbered to 9 (peers built from the older proto send and read it as 1)',
  ]);
});

test('two fields swapping numbers is a break on both', () => {
  const swapped = edit('agent.proto', 'string rendered_config = 1;\n  string spec_json = 2;\n  string pool = 3;', 'string rendered_config = 3;\n  string spec_json = 2;\n  string pool = 1;');
  assert.deepEqual(problems(swapped), [
    'mcplane.v1.Assignment.rendered_config = 1: field number 1 renamed to pool (JSON peers still use rendered_config)',
    'mcplane.v1.Assignment.pool = 3: field number 3 renamed to rendered_config (JSON peers still use pool)',
  ]);
});

test('a field number reused with another type, a renamed field, a field moved out of its oneof: breaks', () => {
  assert.deepEqual(problems(edit('agent.proto', 'string pool = 3;\n  // The pool\'s', 'int32 pool = 3;\n  // The pool\'s')), ['mcplane.v1.Assignment.pool = 3: type changed from string to int32']);
  assert.deepEqual(problems(edit('agent.proto', 'NodeStatus status = 1;\n}', 'NodeStatus report = 1;\n}')), ['mcplane.v1.StatusReport.status = 1: field number 1 renamed to report (JSON peers still use status)']);
  assert.deepEqual(problems(edit('types.proto', 'repeated Drift drift = 6;', 'Drift drift = 6;')), ['mcplane.v1.NodeStatus.drift = 6: type changed from repeated mcplane.v1.Drift to mcplane.v1.Drift']);
  assert.deepEqual(problems(edit('agent.proto', '    Heartbeat heartbeat = 3;\n    RenewCertificate renew = 4;\n  }', '    RenewCertificate renew = 4;\n  }\n  Heartbeat heartbeat = 3;')), ['mcplane.v1.AgentMessage.heartbeat = 3: moved from oneof message to (none)']);
});

test('a removed field breaks unless its number and name are reserved; a new field does not', () => {
  assert.deepEqual(problems(edit('agent.proto', '  string boot_id = 3;\n', '')), [
    'mcplane.v1.Register.boot_id = 3: field number 3 removed without `reserved 3;` (a later field could reuse it with another meaning)',
    'mcplane.v1.Register.boot_id = 3: field name boot_id removed without `reserved "boot_id";` (JSON peers still send it)',
  ]);
  assert.deepEqual(problems(edit('agent.proto', '  string boot_id = 3;\n', '  reserved 3;\n  reserved "boot_id";\n')), []);
  assert.deepEqual(problems(edit('agent.proto', '  string agent_version = 5;\n', '  string agent_version = 5;\n  string kernel_release = 6;\n')), []);
});

test('a removed method or message, or a method whose streaming changed: breaks', () => {
  assert.deepEqual(problems(edit('status.proto', '  rpc GetNode(GetNodeRequest) returns (Node);\n', '')), ['mcplane.v1.StatusService.GetNode: method removed']);
  assert.deepEqual(problems(edit('agent.proto', 'rpc Connect(stream AgentMessage) returns (stream ServerMessage);', 'rpc Connect(AgentMessage) returns (stream ServerMessage);')), [
    'mcplane.v1.AgentService.Connect: signature changed from (stream .mcplane.v1.AgentMessage -> stream .mcplane.v1.ServerMessage) to (.mcplane.v1.AgentMessage -> stream .mcplane.v1.ServerMessage)',
  ]);
  // A oneof case dropped with its number and name reserved is not (the Command message stays).
  const withoutCommand = edit('agent.proto', '    Command command = 3;\n', '');
  withoutCommand['mcplane/v1/agent.proto'] = withoutCommand['mcplane/v1/agent.proto']!.replace('message ServerMessage {\n', 'message ServerMessage {\n  reserved 3;\n  reserved "command";\n');
  assert.deepEqual(problems(withoutCommand), []);
  // A message dropped with the field that carried it: its peers still send it.
  const withoutHeartbeat = edit('agent.proto', '    Heartbeat heartbeat = 3;\n', '');
  withoutHeartbeat['mcplane/v1/agent.proto'] = withoutHeartbeat['mcplane/v1/agent.proto']!.replace('message Heartbeat {}\n', '').replace('message AgentMessage {\n', 'message AgentMessage {\n  reserved 3;\n  reserved "heartbeat";\n');
  assert.deepEqual(problems(withoutHeartbeat), ['mcplane.v1.Heartbeat: removed (peers built from the older proto still send and expect it)']);
});

test('an enum number renamed or removed without reserving it: breaks', () => {
  // mcplane.v1 has no enums today (states travel as strings); the rule is checked on a made-up one.
  const old = rootFromTexts({ 'mcplane/v1/types.proto': 'syntax = "proto3"; package mcplane.v1; enum Phase { PHASE_UNSPECIFIED = 0; PHASE_APPLY = 1; PHASE_REBOOT = 2; }' });
  const next = (body: string) => rootFromTexts({ 'mcplane/v1/types.proto': `syntax = "proto3"; package mcplane.v1; enum Phase { ${body} }` });
  assert.deepEqual(breakingChanges(old, next('PHASE_UNSPECIFIED = 0; PHASE_REBOOT = 1; PHASE_APPLY = 2;')), [
    'mcplane.v1.Phase.PHASE_APPLY = 1: enum number 1 renamed to PHASE_REBOOT (JSON peers send the name)',
    'mcplane.v1.Phase.PHASE_REBOOT = 2: enum number 2 renamed to PHASE_APPLY (JSON peers send the name)',
  ]);
  assert.deepEqual(breakingChanges(old, next('PHASE_UNSPECIFIED = 0; PHASE_APPLY = 1;')), ['mcplane.v1.Phase.PHASE_REBOOT = 2: enum number removed without reserving it']);
  assert.deepEqual(breakingChanges(old, next('PHASE_UNSPECIFIED = 0; PHASE_APPLY = 1; reserved 2;')), []);
});
