// mcctl on the objects added last: pools selected by their labels, and MachineConfiguration/cluster
// (the cluster-wide disruption policy) through validate, apply and delete.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { runCliAsync } from '../helpers/run-cli.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
let conn: string[];
before(async () => {
  server = await startTestServer();
  conn = ['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null'];
});
after(() => server.close());

const mcctl = (...args: string[]) => runCliAsync([...conn, ...args]);

test('get pools -l selects pools by metadata.labels, and -o yaml shows them', async () => {
  const pool = 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: gpu, labels: {tier: accel}}\nspec:\n  machineConfigSelector: {matchLabels: {machineconfiguration.openshift.io/role: gpu}}\n  nodeSelector: {matchLabels: {node-role.kubernetes.io/gpu: ""}}\n';
  const applied = await runCliAsync([...conn, 'apply', '-f', '-'], { input: pool });
  assert.equal(applied.status, 0, applied.stderr);
  const r = await mcctl('get', 'pools', '-l', 'tier=accel', '-o', 'name');
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'machineconfigpool/gpu\n');
  assert.match((await mcctl('get', 'pool', 'gpu', '-o', 'yaml')).stdout, /labels:\n\s+tier: accel/);
});

test('MachineConfiguration/cluster: validate names it, apply and delete speak of it by its kind', async () => {
  const validated = await runCliAsync(['validate', '-f', 'examples/machineconfiguration-cluster.yaml']);
  assert.equal(validated.status, 0, validated.stderr);
  assert.match(validated.stdout, /valid: MachineConfiguration\/cluster/);
  const applied = await mcctl('apply', '-f', 'examples/machineconfiguration-cluster.yaml');
  assert.equal(applied.status, 0, applied.stderr);
  assert.equal(applied.stdout, 'machineconfiguration/cluster created\n');
  const deleted = await mcctl('delete', 'machineconfiguration', 'cluster');
  assert.equal(deleted.status, 0, deleted.stderr);
  assert.equal(deleted.stdout, 'machineconfiguration/cluster deleted\n');
});
