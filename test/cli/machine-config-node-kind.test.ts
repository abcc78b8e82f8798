// MachineConfigNode as the catalogue's derived kind, through mcctl and the real server: listed
// under every name the entry gives it, and refused by delete (nothing of it is stored) with an
// error naming the object, the field and the rule.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { runCliAsync } from '../helpers/run-cli.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => {
  await server?.close();
});

const mcctl = (...args: string[]) => runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', ...args]);

test('mcctl lists MachineConfigNodes under the catalogue entry\'s names', async () => {
  for (const name of ['mcn', 'machineconfignode', 'machineconfignodes']) {
    const r = await mcctl('get', name);
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
  }
  const unknown = await mcctl('get', 'nosuchthing');
  assert.notEqual(unknown.status, 0);
  assert.match(unknown.stderr, /machineconfignodes \(mcn\)/, 'the unknown-resource message names the kind as the catalogue does');
});

test('mcctl delete mcn is refused: the kind is derived from the node\'s records, nothing is stored', async () => {
  const r = await mcctl('delete', 'mcn', 'host-a');
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /MachineConfigNode\/host-a/);
  assert.match(r.stderr, /kind/);
  assert.match(r.stderr, /derived-kind/);
  assert.match(r.stderr, /mcctl delete node host-a/);
});
