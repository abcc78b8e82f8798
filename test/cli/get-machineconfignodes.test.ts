// `mcctl get machineconfignodes` / `mcctl get mcn` against a real server over TLS, with a
// simulated agent reporting over the real agent stream: the CRD's printer columns, -o yaml/-o json
// as `oc get mcn` shows MCO's object, the gRPC read and its access rule, and the object compared
// field by field with MCO's Go types.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { call } from '../../src/cli/client/call.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverFixture } from '../helpers/server-fixture.ts';
import { startTestServer } from '../helpers/test-server.ts';
import { checkFields } from '../helpers/mco-machine-config-node-fields.ts';

type Obj = Record<string, unknown>;

let agent: SimulatedAgent;
const { server, conn, connectAgent } = serverFixture({}, async () => {
  agent = await connectAgent('n1', { autoDone: true, labels: { 'node-role.kubernetes.io/worker': '' } });
  await agent.waitFor(() => agent.status.state === 'Done' && agent.status.currentConfig !== '' && agent.status.currentConfig === agent.lastAssignment?.renderedConfig);
  // What the agent's staging and PinnedImageSet work will report (fields 15-16), over the stream.
  agent.report({
    staging: { config: 'rendered-worker-next', state: 'Staged', bytesDone: 800, bytesTotal: 800, reason: '', startedUnixMs: Date.parse('2026-11-29T08:00:00Z'), endedUnixMs: Date.parse('2026-11-29T08:01:40Z') },
    pinnedImageSets: [
      { name: 'web-images', desiredGeneration: 2, currentGeneration: 2, imagesDone: 3, imagesTotal: 3, lastFailedImage: '', lastFailureReason: '', lastFailureUnixMs: 0 },
      { name: 'db-images', desiredGeneration: 4, currentGeneration: 3, imagesDone: 0, imagesTotal: 1, lastFailedImage: 'quay.io/db@sha256:' + 'a'.repeat(64), lastFailureReason: 'manifest unknown', lastFailureUnixMs: Date.parse('2026-11-29T08:02:00Z') },
    ],
  });
});

async function mcnJson(name: string): Promise<Obj> {
  // The report is stored asynchronously: read until the sets are there.
  for (let i = 0; ; i++) {
    const r = await runCliAsync([...conn, 'get', 'mcn', name, '-o', 'json']);
    assert.equal(r.status, 0, r.stderr);
    const o = JSON.parse(r.stdout) as Obj;
    if ((o.status as Obj).pinnedImageSets || i > 50) return o;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test('get mcn: the CRD\'s printer columns (oc get mcn), -o wide adds the per-step ones', async () => {
  const o = await mcnJson('n1');
  const current = ((o.status as Obj).configVersion as Obj).current as string;
  assert.match(current, /^rendered-worker-/);
  const r = await runCliAsync([...conn, 'get', 'machineconfignodes']);
  assert.equal(r.status, 0, r.stderr);
  const [head, row] = r.stdout.trimEnd().split('\n');
  assert.deepEqual(head!.split(/\s+/), ['NAME', 'POOLNAME', 'DESIREDCONFIG', 'CURRENTCONFIG', 'UPDATED', 'AGE']);
  const cells = row!.split(/\s+/);
  assert.deepEqual(cells.slice(0, 5), ['n1', 'worker', current, current, 'True']);
  const wide = await runCliAsync([...conn, 'get', 'mcn', '-o', 'wide', '--pool', 'worker']);
  assert.equal(wide.status, 0, wide.stderr);
  assert.deepEqual(wide.stdout.split('\n')[0]!.split(/\s+/).slice(6), ['UPDATEPREPARED', 'UPDATEEXECUTED', 'UPDATEPOSTACTIONCOMPLETE', 'UPDATECOMPLETE', 'RESUMED', 'UPDATEDFILESANDOS', 'CORDONEDNODE', 'DRAINEDNODE', 'REBOOTEDNODE', 'UNCORDONEDNODE']);
  const none = await runCliAsync([...conn, 'get', 'mcn', '--pool', 'master']);
  assert.equal(none.status, 0, none.stderr);
  assert.doesNotMatch(none.stdout, /n1/);
});

test('get mcn -o yaml: MCO\'s object, every field one of MCO\'s Go types (field by field)', async () => {
  await mcnJson('n1');
  const r = await runCliAsync([...conn, 'get', 'mcn', 'n1', '-o', 'yaml']);
  assert.equal(r.status, 0, r.stderr);
  const o = parseYaml(r.stdout) as Obj;
  checkFields('MachineConfigNode', o, 'MachineConfigNode');
  assert.equal(o.apiVersion, 'machineconfiguration.openshift.io/v1');
  assert.equal(o.kind, 'MachineConfigNode');
  assert.equal((o.metadata as Obj).name, 'n1');
  const spec = o.spec as Obj;
  checkFields('spec', spec, 'MachineConfigNodeSpec');
  checkFields('spec.node', spec.node, 'MCOObjectReference');
  checkFields('spec.pool', spec.pool, 'MCOObjectReference');
  checkFields('spec.configVersion', spec.configVersion, 'MachineConfigNodeSpecMachineConfigVersion');
  assert.deepEqual([(spec.node as Obj).name, (spec.pool as Obj).name], ['n1', 'worker']);
  const status = o.status as Obj;
  checkFields('status', status, 'MachineConfigNodeStatus');
  checkFields('status.configVersion', status.configVersion, 'MachineConfigNodeStatusMachineConfigVersion');
  assert.ok(Number.isInteger(status.observedGeneration) && (status.observedGeneration as number) >= 1, 'observedGeneration: Minimum=1');
  const conditions = status.conditions as Obj[];
  assert.ok(conditions.length <= 20, 'MaxItems=20');
  for (const c of conditions) {
    checkFields(`condition ${c.type as string}`, c, 'Condition');
    assert.match(c.lastTransitionTime as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.ok(['True', 'False', 'Unknown'].includes(c.status as string));
  }
  assert.deepEqual(conditions.map((c) => c.type), [
    'UpdatePrepared', 'UpdateExecuted', 'UpdatePostActionComplete', 'UpdateComplete', 'Resumed', 'Drained', 'AppliedFilesAndOS',
    'Cordoned', 'RebootedNode', 'Updated', 'Uncordoned', 'NodeDegraded', 'PinnedImageSetsDegraded', 'PinnedImageSetsProgressing', 'Staged',
  ]);
  const sets = status.pinnedImageSets as Obj[];
  for (const [i, s] of sets.entries()) checkFields(`pinnedImageSets[${i}]`, s, 'MachineConfigNodeStatusPinnedImageSet');
  // The sets as the agent reported them over the stream, in MCO's fields.
  assert.deepEqual(sets, [
    { name: 'web-images', desiredGeneration: 2, currentGeneration: 2 },
    { name: 'db-images', desiredGeneration: 4, currentGeneration: 3, lastFailedGeneration: 4, lastFailedGenerationError: `quay.io/db@sha256:${'a'.repeat(64)}: manifest unknown` },
  ]);
  const byType = new Map(conditions.map((c) => [c.type, c]));
  assert.deepEqual(byType.get('PinnedImageSetsDegraded'), { lastTransitionTime: '2026-11-29T08:02:00Z', message: 'One or more PinnedImageSet is experiencing an error. See PinnedImageSet list for more details.', reason: 'PrefetchFailed', status: 'True', type: 'PinnedImageSetsDegraded' });
  assert.deepEqual(byType.get('Staged'), { lastTransitionTime: '2026-11-29T08:01:40Z', message: 'Downloaded the OS content for rendered-worker-next (800 of 800 bytes) before the drain', reason: 'Staged', status: 'True', type: 'Staged' });

  // The same object twice: nothing is taken from the clock.
  const again = await runCliAsync([...conn, 'get', 'mcn', 'n1', '-o', 'yaml']);
  assert.equal(again.stdout, r.stdout);
});

// Who may call them (viewers and up) is test/controlplane/api-roles.test.ts'.
test('the gRPC read: ListMachineConfigNodes and GetMachineConfigNode; an unknown node is NOT_FOUND, named', async () => {
  const viewer = server.admin();
  {
    const list = await call(viewer, viewer.status.listMachineConfigNodes.bind(viewer.status), { pool: '' }, 'list');
    assert.deepEqual(list.machineConfigNodes.map((m) => m.name), ['n1']);
    const one = await call(viewer, viewer.status.getMachineConfigNode.bind(viewer.status), { name: 'n1' }, 'get');
    assert.equal(one.pool, 'worker');
    await assert.rejects(call(viewer, viewer.status.getMachineConfigNode.bind(viewer.status), { name: 'ghost' }, 'get'), (err: Error & { grpcCode?: number }) => {
      assert.equal(err.grpcCode, 5);
      assert.match(err.message, /MachineConfigNode.*ghost/);
      return true;
    });
  }
  const cli = await runCliAsync([...conn, 'get', 'mcn', 'ghost']);
  assert.notEqual(cli.status, 0);
  assert.match(cli.stderr, /ghost/);
});

test('on the status thread (--status-listen): the same object, its history read through the relay, the relay undisturbed', async () => {
  const s = await startTestServer({ statusListen: '127.0.0.1:0' });
  const a = new SimulatedAgent({ address: s.address, tls: await s.pki.node('t1'), name: 't1', autoDone: true, labels: { 'node-role.kubernetes.io/worker': '' } });
  try {
    await a.connect();
    await a.waitFor(() => a.status.state === 'Done' && a.status.currentConfig !== '' && a.status.currentConfig === a.lastAssignment?.renderedConfig);
    const to = a.status.currentConfig!;
    // The update the agent says it finished: the replica holding its stream stores it in the node's history.
    const lastUpdate = { id: 'u1', fromConfig: '', toConfig: to, startedUnixMs: Date.parse('2026-11-29T08:00:00Z'), endedUnixMs: Date.parse('2026-11-29T08:00:07Z'), disruption: 'none', result: 'Done', reason: '',
      phases: ['check', 'diff', 'plan', 'apply', 'actions', 'validate'].map((name, i) => ({ name, startedUnixMs: Date.parse('2026-11-29T08:00:00Z') + i * 1000, endedUnixMs: Date.parse('2026-11-29T08:00:01Z') + i * 1000, source: 'agent' })) };
    a.report({ lastUpdate });
    const c = s.admin();
    await eventually(async () => (await call(c, c.status.getNodeHistory.bind(c.status), { name: 't1' }, 'history')).updates.length === 1, 10_000, 'the update in the history');
    const conn = ['--server', s.address, '--pki-dir', s.pki.dir, '--config', '/dev/null', '--status-server', `127.0.0.1:${s.handle.statusPort}`];
    const r = await runCliAsync([...conn, 'get', 'mcn', '-o', 'json']);
    assert.equal(r.status, 0, r.stderr);
    const [item] = (JSON.parse(r.stdout) as { items: Obj[] }).items;
    assert.equal((item!.metadata as Obj).name, 't1');
    const status = item!.status as { observedGeneration: number; conditions: { type: string; status: string; lastTransitionTime: string; reason: string }[] };
    assert.equal(status.observedGeneration, 2, 'one update in the history');
    const of = (type: string) => status.conditions.find((x) => x.type === type)!;
    assert.deepEqual([of('Updated').status, of('Updated').lastTransitionTime], ['True', '2026-11-29T08:00:07Z']);
    assert.deepEqual([of('UpdatePostActionComplete').status, of('UpdatePostActionComplete').reason, of('UpdatePostActionComplete').lastTransitionTime], ['False', 'None', '2026-11-29T08:00:07Z']);
    // The status thread's cache still follows the store after those reads.
    await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: true }, 'pause');
    await eventually(async () => {
      const p = await runCliAsync([...conn, 'get', 'pools', 'worker', '-o', 'json']);
      return (JSON.parse(p.stdout) as { spec: { paused?: boolean } }).spec.paused === true;
    }, 10_000, 'the pause on the status port');
  } finally {
    a.close();
    await s.close();
  }
});
