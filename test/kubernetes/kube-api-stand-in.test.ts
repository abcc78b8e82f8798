// The Kubernetes API stand-in, driven by the real @kubernetes/client-node: every behaviour the
// stand-in documents (and mcplane relies on) is asserted here, so a test that passes against it
// exercises the API as the real apiserver serves it.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { get as httpsGet } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as k8s from '@kubernetes/client-node';
import { startKubeApiStandIn, type KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';

const MCO_GROUP = 'machineconfiguration.openshift.io';
const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
const strategic = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);
const jsonPatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch);

/** The Status the server answered with, from the client's exception. */
async function failure(call: Promise<unknown>): Promise<{ code: number; status: any }> {
  try {
    await call;
  } catch (err) {
    if (err instanceof k8s.ApiException) return { code: err.code, status: typeof err.body === 'string' ? JSON.parse(err.body) : err.body };
    throw err;
  }
  assert.fail('the call succeeded');
}

function pod(namespace: string, name: string, node: string, labels: Record<string, string>, grace?: number): k8s.V1Pod {
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name, namespace, labels },
    spec: { nodeName: node, containers: [{ name: 'c', image: 'registry.example.com/app:1' }], ...(grace !== undefined ? { terminationGracePeriodSeconds: grace } : {}) },
  };
}

async function waitFor<T>(what: string, read: () => T | undefined, timeoutMs = 5000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = read();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('Kubernetes API stand-in (through @kubernetes/client-node)', () => {
  let standIn: KubeApiStandIn;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  let policy: k8s.PolicyV1Api;
  let custom: k8s.CustomObjectsApi;
  const dir = mkdtempSync(join(tmpdir(), 'kube-stand-in-'));

  before(async () => {
    standIn = await startKubeApiStandIn({ timeScale: 0.01 });
    kc = new k8s.KubeConfig();
    kc.loadFromFile(standIn.writeKubeconfig(dir));
    core = kc.makeApiClient(k8s.CoreV1Api);
    policy = kc.makeApiClient(k8s.PolicyV1Api);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
  });
  after(() => standIn.close());

  it('serves HTTPS on 127.0.0.1 with a port of its own and refuses a request without the bearer token (401 Status)', async () => {
    assert.match(standIn.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(standIn.port, 0);
    const anonymous = new k8s.KubeConfig();
    anonymous.loadFromOptions({
      clusters: [{ name: 'c', server: standIn.url, caData: Buffer.from(standIn.caPem).toString('base64') }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    assert.equal((await failure(anonymous.makeApiClient(k8s.CoreV1Api).listNode())).code, 401);
    // The client drops a 401's body; the Status itself, read directly:
    const raw = await new Promise<{ code: number; body: any }>((resolve, reject) => {
      httpsGet(`${standIn.url}/api/v1/nodes`, { ca: standIn.caPem }, (res) => {
        let text = '';
        res.on('data', (c) => { text += c; });
        res.on('end', () => resolve({ code: res.statusCode!, body: JSON.parse(text) }));
      }).on('error', reject);
    });
    assert.equal(raw.code, 401);
    assert.deepEqual([raw.body.kind, raw.body.status, raw.body.reason, raw.body.code], ['Status', 'Failure', 'Unauthorized', 401]);
    const wrong = new k8s.KubeConfig();
    wrong.loadFromOptions({ ...anonymous, clusters: anonymous.clusters, users: [{ name: 'u', token: 'not-the-token' }], contexts: anonymous.contexts, currentContext: 'x' });
    assert.equal((await failure(wrong.makeApiClient(k8s.CoreV1Api).listNode())).code, 401);
    assert.ok(standIn.requests.some((r) => !r.authenticated && r.code === 401));
  });

  it('nodes: create, get, list by label, 409 AlreadyExists, one global resourceVersion', async () => {
    const a = await core.createNode({ body: { metadata: { name: 'node-a', labels: { 'node-role.kubernetes.io/worker': '' } } } });
    const b = await core.createNode({ body: { metadata: { name: 'node-b', labels: { 'node-role.kubernetes.io/master': '' } } } });
    assert.ok(Number(b.metadata!.resourceVersion) > Number(a.metadata!.resourceVersion));
    assert.ok(a.metadata!.uid && a.metadata!.creationTimestamp);
    assert.equal((await core.readNode({ name: 'node-a' })).metadata!.uid, a.metadata!.uid);
    const workers = await core.listNode({ labelSelector: 'node-role.kubernetes.io/worker' });
    assert.deepEqual(workers.items.map((n) => n.metadata!.name), ['node-a']);
    assert.deepEqual((await core.listNode({ labelSelector: '!node-role.kubernetes.io/worker' })).items.map((n) => n.metadata!.name), ['node-b']);
    assert.equal(workers.metadata!.resourceVersion, String(standIn.resourceVersion()));
    const exists = await failure(core.createNode({ body: { metadata: { name: 'node-a' } } }));
    assert.equal(exists.code, 409);
    assert.equal(exists.status.reason, 'AlreadyExists');
    assert.equal(exists.status.message, 'nodes "node-a" already exists');
    const missing = await failure(core.readNode({ name: 'nope' }));
    assert.deepEqual([missing.code, missing.status.reason, missing.status.message], [404, 'NotFound', 'nodes "nope" not found']);
  });

  it('update (PUT) with a stale metadata.resourceVersion is 409 Conflict; with the current one it writes', async () => {
    const node = await core.readNode({ name: 'node-a' });
    const stale = structuredClone(node);
    node.metadata!.labels = { ...node.metadata!.labels, zone: 'z1' };
    const written = await core.replaceNode({ name: 'node-a', body: node });
    assert.equal(written.metadata!.labels!.zone, 'z1');
    stale.metadata!.labels = { other: 'x' };
    const conflict = await failure(core.replaceNode({ name: 'node-a', body: stale }));
    assert.equal(conflict.code, 409);
    assert.equal(conflict.status.reason, 'Conflict');
    assert.match(conflict.status.message, /Operation cannot be fulfilled on nodes "node-a": the object has been modified/);
    assert.equal((await core.readNode({ name: 'node-a' })).metadata!.labels!.zone, 'z1');
  });

  it('patch: merge, strategic merge (as merge) and JSON patch; a patch carrying a stale resourceVersion is 409', async () => {
    const merged = await core.patchNode({ name: 'node-a', body: { spec: { unschedulable: true }, metadata: { labels: { zone: null, rack: 'r1' } } } }, merge);
    assert.equal(merged.spec!.unschedulable, true);
    assert.equal(merged.metadata!.labels!.zone, undefined);
    assert.equal(merged.metadata!.labels!.rack, 'r1');
    const viaStrategic = await core.patchNode({ name: 'node-a', body: { metadata: { annotations: { 'machineconfiguration.openshift.io/state': 'Working' } } } }, strategic);
    assert.equal(viaStrategic.metadata!.annotations!['machineconfiguration.openshift.io/state'], 'Working');
    const viaJson = await core.patchNode({ name: 'node-a', body: [
      { op: 'test', path: '/spec/unschedulable', value: true },
      { op: 'replace', path: '/spec/unschedulable', value: false },
      { op: 'add', path: '/metadata/labels/topology.kubernetes.io~1zone', value: 'z2' },
    ] }, jsonPatch);
    assert.equal(viaJson.spec!.unschedulable, false);
    assert.equal(viaJson.metadata!.labels!['topology.kubernetes.io/zone'], 'z2');
    const failedTest = await failure(core.patchNode({ name: 'node-a', body: [{ op: 'test', path: '/spec/unschedulable', value: true }] }, jsonPatch));
    assert.equal(failedTest.code, 422);
    const stale = await failure(core.patchNode({ name: 'node-a', body: { metadata: { resourceVersion: '1' }, spec: { unschedulable: true } } }, merge));
    assert.equal(stale.code, 409);
    assert.equal(stale.status.reason, 'Conflict');
    const ssa = await failure(core.patchNode({ name: 'node-a', body: {} }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply)));
    assert.equal(ssa.code, 415);
  });

  it('status subresource: /status changes only status, the main resource ignores status', async () => {
    const node = await core.readNode({ name: 'node-b' });
    node.status = { conditions: [{ type: 'Ready', status: 'True' }] };
    node.metadata!.labels = { ...node.metadata!.labels, sneaky: 'yes' };
    const s = await core.replaceNodeStatus({ name: 'node-b', body: node });
    assert.equal(s.status!.conditions![0]!.type, 'Ready');
    assert.equal(s.metadata!.labels!.sneaky, undefined, 'a /status write must not change labels');
    const main = await core.patchNode({ name: 'node-b', body: { status: { conditions: [] }, metadata: { labels: { fine: 'yes' } } } }, merge);
    assert.equal(main.metadata!.labels!.fine, 'yes');
    assert.equal(main.status!.conditions!.length, 1, 'the main resource must ignore status');
    const patched = await core.patchNodeStatus({ name: 'node-b', body: { status: { conditions: [{ type: 'Ready', status: 'False' }] }, spec: { unschedulable: true } } }, merge);
    assert.equal(patched.status!.conditions![0]!.status, 'False');
    assert.notEqual(patched.spec?.unschedulable, true, 'a /status patch must not change spec');
  });

  it('pods: list across namespaces and by fieldSelector spec.nodeName=; delete is graceful', async () => {
    standIn.add(pod('apps', 'web-1', 'node-a', { app: 'web' }));
    standIn.add(pod('apps', 'web-2', 'node-b', { app: 'web' }));
    standIn.add(pod('kube-system', 'dns-1', 'node-a', { app: 'dns' }));
    const all = await core.listPodForAllNamespaces();
    assert.deepEqual(all.items.map((p) => `${p.metadata!.namespace}/${p.metadata!.name}`).sort(), ['apps/web-1', 'apps/web-2', 'kube-system/dns-1']);
    const onA = await core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=node-a' });
    assert.deepEqual(onA.items.map((p) => p.metadata!.name).sort(), ['dns-1', 'web-1']);
    const inApps = await core.listNamespacedPod({ namespace: 'apps', labelSelector: 'app in (web,db)' });
    assert.equal(inApps.items.length, 2);
    const created = await core.createNamespacedPod({ namespace: 'apps', body: { metadata: { name: 'new-1', labels: { app: 'web' } }, spec: { nodeName: 'node-b', containers: [{ name: 'c', image: 'x' }] }, status: { phase: 'Running' } } });
    assert.equal(created.status!.phase, 'Pending', 'a created pod is Pending until its kubelet reports');
    assert.deepEqual((await core.listNamespacedPod({ namespace: 'apps', fieldSelector: 'status.phase=Pending' })).items.map((p) => p.metadata!.name), ['new-1']);
    await core.deleteNamespacedPod({ name: 'new-1', namespace: 'apps', body: { gracePeriodSeconds: 0 } });
    const bad = await failure(core.listPodForAllNamespaces({ fieldSelector: 'spec.color=red' }));
    assert.equal(bad.code, 400);
    const deleted = await core.deleteNamespacedPod({ name: 'dns-1', namespace: 'kube-system', gracePeriodSeconds: 0 });
    assert.equal(deleted.metadata!.name, 'dns-1');
    assert.equal(standIn.get('Pod', 'dns-1', 'kube-system'), undefined);
  });

  it('watch: resumes from a resourceVersion with ADDED/MODIFIED/DELETED, and gets 410 Gone (an ERROR event) after compaction', async () => {
    const list = await core.listNode();
    const from = list.metadata!.resourceVersion!;
    const events: { type: string; name: string; rv: string }[] = [];
    const watch = new k8s.Watch(kc);
    const controller = await watch.watch('/api/v1/nodes', { resourceVersion: from }, (type, obj) => {
      events.push({ type, name: obj.metadata.name, rv: obj.metadata.resourceVersion });
    }, () => {});
    await core.createNode({ body: { metadata: { name: 'node-c' } } });
    await core.patchNode({ name: 'node-c', body: { metadata: { labels: { x: 'y' } } } }, merge);
    await core.deleteNode({ name: 'node-c' });
    await waitFor('three events', () => events.length >= 3);
    controller.abort();
    assert.deepEqual(events.map((e) => `${e.type} ${e.name}`), ['ADDED node-c', 'MODIFIED node-c', 'DELETED node-c']);
    assert.ok(Number(events[2]!.rv) > Number(events[1]!.rv));

    // Resuming from the middle replays exactly what followed.
    const replayed: string[] = [];
    const c2 = await watch.watch('/api/v1/nodes', { resourceVersion: events[0]!.rv }, (type) => { replayed.push(type); }, () => {});
    await waitFor('the replay', () => replayed.length >= 2);
    c2.abort();
    assert.deepEqual(replayed, ['MODIFIED', 'DELETED']);

    // A watch on a selection: a change that leaves it is DELETED.
    const selected: string[] = [];
    const c3 = await watch.watch('/api/v1/nodes', { labelSelector: 'pick=me' }, (type, obj) => { selected.push(`${type} ${obj.metadata.name}`); }, () => {});
    await core.patchNode({ name: 'node-a', body: { metadata: { labels: { pick: 'me' } } } }, merge);
    await core.patchNode({ name: 'node-a', body: { metadata: { labels: { pick: null } } } }, merge);
    await waitFor('selection events', () => selected.length >= 2);
    c3.abort();
    assert.deepEqual(selected, ['ADDED node-a', 'DELETED node-a']);

    standIn.compact();
    let gone: any;
    let doneErr: unknown = 'not called';
    await new Promise<void>((resolve) => {
      void watch.watch('/api/v1/nodes', { resourceVersion: from }, (type, obj) => { if (type === 'ERROR') gone = obj; }, (err) => { doneErr = err; resolve(); });
    });
    assert.equal(doneErr, null, 'the stream ends normally after the ERROR event');
    assert.deepEqual([gone.kind, gone.code, gone.reason], ['Status', 410, 'Expired']);
    assert.match(gone.message, /^too old resource version: \d+ \(\d+\)$/);
  });

  it('?watch=1&resourceVersion=N on the wire: newline-delimited JSON events on a 200 that stays open', async () => {
    const from = standIn.resourceVersion();
    const lines: string[] = [];
    const req = httpsGet(`${standIn.url}/api/v1/nodes?watch=1&resourceVersion=${from}`, { ca: standIn.caPem, headers: { Authorization: `Bearer ${standIn.token}` } });
    const response = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => req.on('response', resolve).on('error', reject));
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /application\/json/);
    let buffer = '';
    response.on('data', (chunk) => {
      buffer += chunk;
      const parts = buffer.split('\n');
      buffer = parts.pop()!;
      lines.push(...parts);
    });
    await core.createNode({ body: { metadata: { name: 'node-wire' } } });
    await core.deleteNode({ name: 'node-wire' });
    await waitFor('two lines', () => lines.length >= 2);
    req.destroy();
    const events = lines.map((l) => JSON.parse(l));
    assert.deepEqual(events.map((e) => [e.type, e.object.kind, e.object.metadata.name]), [['ADDED', 'Node', 'node-wire'], ['DELETED', 'Node', 'node-wire']]);
    assert.ok(Number(events[0].object.metadata.resourceVersion) > from);
  });

  it('a watch without resourceVersion starts with ADDED for every object; closeWatches ends it from the server side', async () => {
    const seen: string[] = [];
    let ended = false;
    await new k8s.Watch(kc).watch('/api/v1/namespaces/apps/pods', {}, (type, obj) => { seen.push(`${type} ${obj.metadata.name}`); }, () => { ended = true; });
    await waitFor('the initial state', () => seen.length >= 2);
    assert.deepEqual(seen.sort(), ['ADDED web-1', 'ADDED web-2']);
    standIn.closeWatches();
    await waitFor('the end of the stream', () => ended);
  });

  it('eviction: a PDB (minAvailable int) refuses with 429 naming the budget; an accepted eviction deletes after the pod\'s own grace period', async () => {
    const ns = 'evict-a';
    for (const [name, node] of [['db-0', 'node-a'], ['db-1', 'node-b'], ['db-2', 'node-b']] as const) {
      standIn.add(pod(ns, name, node, { app: 'db' }, 30));
      standIn.markPodReady(ns, name);
    }
    await policy.createNamespacedPodDisruptionBudget({ namespace: ns, body: { metadata: { name: 'db-pdb' }, spec: { minAvailable: 2, selector: { matchLabels: { app: 'db' } } } } });
    const pdb = await waitFor('the PDB status', () => { const p = standIn.get('PodDisruptionBudget', 'db-pdb', ns); return p?.status?.expectedPods === 3 ? p : undefined; });
    assert.deepEqual([pdb.status.currentHealthy, pdb.status.desiredHealthy, pdb.status.disruptionsAllowed], [3, 2, 1]);

    const t0 = Date.now();
    await core.createNamespacedPodEviction({ name: 'db-0', namespace: ns, body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: 'db-0', namespace: ns } } });
    const terminating = await core.readNamespacedPod({ name: 'db-0', namespace: ns });
    assert.ok(terminating.metadata!.deletionTimestamp, 'an accepted eviction sets deletionTimestamp');
    assert.equal(terminating.metadata!.deletionGracePeriodSeconds, 30);

    const refused = await failure(core.createNamespacedPodEviction({ name: 'db-1', namespace: ns, body: { metadata: { name: 'db-1', namespace: ns } } }));
    assert.equal(refused.code, 429);
    assert.equal(refused.status.reason, 'TooManyRequests');
    assert.equal(refused.status.message, "Cannot evict pod as it would violate the pod's disruption budget.");
    assert.deepEqual(refused.status.details.causes, [{ reason: 'DisruptionBudget', message: 'The disruption budget db-pdb needs 2 healthy pods and has 2 currently' }]);
    assert.ok(standIn.get('Pod', 'db-1', ns), 'a refused eviction deletes nothing');

    // 30 s x 0.01 = 300 ms, then the pod is gone.
    await waitFor('db-0 removed', () => standIn.get('Pod', 'db-0', ns) === undefined);
    assert.ok(Date.now() - t0 >= 250, `removed after ${Date.now() - t0} ms, before its grace period`);
    // Gone but not replaced: 2 expected, 2 healthy, 2 desired: still no disruption allowed.
    assert.equal((await failure(core.createNamespacedPodEviction({ name: 'db-1', namespace: ns, body: {} }))).code, 429);
    // A replacement becomes ready: the budget frees.
    standIn.add(pod(ns, 'db-3', 'node-a', { app: 'db' }));
    standIn.markPodReady(ns, 'db-3');
    await core.createNamespacedPodEviction({ name: 'db-1', namespace: ns, body: { metadata: { name: 'db-1' }, deleteOptions: { gracePeriodSeconds: 0 } } });
    assert.equal(standIn.get('Pod', 'db-1', ns), undefined, 'deleteOptions.gracePeriodSeconds 0 deletes at once');
  });

  it('eviction: maxUnavailable as a percent, unready pods, pods without a budget, two budgets', async () => {
    const ns = 'evict-b';
    for (const name of ['w-0', 'w-1', 'w-2', 'w-3']) {
      // 3000 s x 0.01: evicted pods stay terminating through the test, as with a slow shutdown.
      standIn.add(pod(ns, name, 'node-a', { app: 'w' }, 3000));
      standIn.markPodReady(ns, name);
    }
    // 25% of 4 = 1 unavailable: 3 desired.
    await policy.createNamespacedPodDisruptionBudget({ namespace: ns, body: { metadata: { name: 'w-pdb' }, spec: { maxUnavailable: '25%', selector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['w'] }] } } } });
    await core.createNamespacedPodEviction({ name: 'w-0', namespace: ns, body: {} });
    const refused = await failure(core.createNamespacedPodEviction({ name: 'w-1', namespace: ns, body: {} }));
    assert.equal(refused.code, 429);
    assert.equal(refused.status.details.causes[0].message, 'The disruption budget w-pdb needs 3 healthy pods and has 3 currently');
    const read = await policy.readNamespacedPodDisruptionBudget({ name: 'w-pdb', namespace: ns });
    assert.deepEqual([read.status!.expectedPods, read.status!.currentHealthy, read.status!.desiredHealthy, read.status!.disruptionsAllowed], [4, 3, 3, 0]);
    assert.equal(read.status!.conditions![0]!.reason, 'InsufficientPods');
    // An unready pod may go while the budget is met (IfHealthyBudget)...
    standIn.markPodReady(ns, 'w-2', false);
    const unready = await failure(core.createNamespacedPodEviction({ name: 'w-2', namespace: ns, body: {} }));
    assert.equal(unready.code, 429, 'the budget is not met (2 healthy of 3)');
    assert.equal(unready.status.details.causes[0].message, 'The disruption budget w-pdb needs 3 healthy pods and has 2 currently');
    await policy.patchNamespacedPodDisruptionBudget({ name: 'w-pdb', namespace: ns, body: { spec: { unhealthyPodEvictionPolicy: 'AlwaysAllow' } } }, merge);
    await core.createNamespacedPodEviction({ name: 'w-2', namespace: ns, body: {} });
    // ...a pod no budget selects is evicted freely...
    standIn.add(pod(ns, 'lonely', 'node-a', { app: 'other' }));
    standIn.markPodReady(ns, 'lonely');
    await core.createNamespacedPodEviction({ name: 'lonely', namespace: ns, body: { deleteOptions: { gracePeriodSeconds: 0 } } });
    assert.equal(standIn.get('Pod', 'lonely', ns), undefined);
    // ...and two budgets over one pod is the apiserver's 500.
    await policy.createNamespacedPodDisruptionBudget({ namespace: ns, body: { metadata: { name: 'w-pdb-2' }, spec: { minAvailable: 0, selector: { matchLabels: { app: 'w' } } } } });
    const two = await failure(core.createNamespacedPodEviction({ name: 'w-3', namespace: ns, body: {} }));
    assert.equal(two.code, 500);
    assert.match(two.status.message, /more than one PodDisruptionBudget/);
    const gone = await failure(core.createNamespacedPodEviction({ name: 'no-such-pod', namespace: ns, body: {} }));
    assert.equal(gone.code, 404);
  });

  it('eviction: minAvailable as a percent rounds up (50% of 3 pods needs 2)', async () => {
    const ns = 'evict-c';
    for (const name of ['p-0', 'p-1', 'p-2']) {
      standIn.add(pod(ns, name, 'node-b', { app: 'p' }, 3000));
      standIn.markPodReady(ns, name);
    }
    await policy.createNamespacedPodDisruptionBudget({ namespace: ns, body: { metadata: { name: 'p-pdb' }, spec: { minAvailable: '50%', selector: { matchLabels: { app: 'p' } } } } });
    await core.createNamespacedPodEviction({ name: 'p-0', namespace: ns, body: {} });
    const refused = await failure(core.createNamespacedPodEviction({ name: 'p-1', namespace: ns, body: {} }));
    assert.equal(refused.status.details.causes[0].message, 'The disruption budget p-pdb needs 2 healthy pods and has 2 currently');
  });

  it('events: create and list, namespaced', async () => {
    await core.createNamespacedEvent({ namespace: 'default', body: {
      metadata: { name: 'worker.1' },
      involvedObject: { apiVersion: `${MCO_GROUP}/v1`, kind: 'MachineConfigPool', name: 'worker' },
      reason: 'RenderFailed', message: 'bad', type: 'Warning', count: 1,
    } });
    const patched = await core.patchNamespacedEvent({ name: 'worker.1', namespace: 'default', body: { count: 2 } }, strategic);
    assert.equal(patched.count, 2);
    const list = await core.listNamespacedEvent({ namespace: 'default', fieldSelector: 'involvedObject.name=worker' });
    assert.deepEqual(list.items.map((e) => [e.reason, e.count, e.type]), [['RenderFailed', 2, 'Warning']]);
    assert.equal((await core.listNamespacedEvent({ namespace: 'other' })).items.length, 0);
  });

  it('CRDs: machineconfigs and machineconfigpools (cluster-scoped); MCP create drops status, /status writes it, generation follows spec', async () => {
    const mc = await custom.createClusterCustomObject({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigs', body: {
      apiVersion: `${MCO_GROUP}/v1`, kind: 'MachineConfig',
      metadata: { name: '50-a', labels: { 'machineconfiguration.openshift.io/role': 'worker' } },
      spec: { config: { ignition: { version: '3.4.0' } } },
    } });
    assert.equal(mc.kind, 'MachineConfig');
    const mcs = await custom.listClusterCustomObject({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigs', labelSelector: 'machineconfiguration.openshift.io/role=worker' });
    assert.deepEqual(mcs.items.map((o: any) => [o.apiVersion, o.kind, o.metadata.name]), [[`${MCO_GROUP}/v1`, 'MachineConfig', '50-a']]);
    assert.ok(mcs.metadata.resourceVersion);

    const pool = await custom.createClusterCustomObject({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigpools', body: {
      apiVersion: `${MCO_GROUP}/v1`, kind: 'MachineConfigPool', metadata: { name: 'infra' },
      spec: { machineConfigSelector: { matchLabels: { x: 'y' } } }, status: { machineCount: 99 },
    } });
    assert.equal(pool.status, undefined, 'create drops status on a CRD with a status subresource');
    assert.equal(pool.metadata.generation, 1);
    const withStatus = await custom.patchClusterCustomObjectStatus({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigpools', name: 'infra',
      body: { status: { observedGeneration: 1, machineCount: 3 }, spec: { paused: true } } }, merge);
    assert.equal(withStatus.status.machineCount, 3);
    assert.equal(withStatus.spec.paused, undefined);
    assert.equal(withStatus.metadata.generation, 1, 'a status write is not a spec change');
    const paused = await custom.patchClusterCustomObject({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigpools', name: 'infra',
      body: { spec: { paused: true }, status: { machineCount: 0 } } }, merge);
    assert.equal(paused.spec.paused, true);
    assert.equal(paused.metadata.generation, 2);
    assert.equal(paused.status.machineCount, 3, 'the main resource ignores status');
    const stale = structuredClone(withStatus);
    stale.status.machineCount = 7;
    const conflict = await failure(custom.replaceClusterCustomObjectStatus({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigpools', name: 'infra', body: stale }));
    assert.equal(conflict.code, 409);
    assert.match(conflict.status.message, /machineconfigpools\.machineconfiguration\.openshift\.io "infra"/);
    const fresh = await custom.getClusterCustomObjectStatus({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigpools', name: 'infra' });
    fresh.status.machineCount = 7;
    assert.equal((await custom.replaceClusterCustomObjectStatus({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigpools', name: 'infra', body: fresh })).status.machineCount, 7);
    await custom.deleteClusterCustomObject({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigs', name: '50-a' });
    assert.equal((await failure(custom.getClusterCustomObject({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigs', name: '50-a' }))).code, 404);
  });

  it('serves discovery, so clients that resolve kinds through it (KubernetesObjectApi) work', async () => {
    const objects = k8s.KubernetesObjectApi.makeApiClient(kc);
    const pool = await objects.read({ apiVersion: `${MCO_GROUP}/v1`, kind: 'MachineConfigPool', metadata: { name: 'infra' } }) as any;
    assert.equal(pool.spec.paused, true);
    const nodes = await objects.list('v1', 'Node');
    assert.ok(nodes.items.length >= 2);
    const versions = await kc.makeApiClient(k8s.CoreApi).getAPIVersions();
    assert.deepEqual(versions.versions, ['v1']);
    const groups = await kc.makeApiClient(k8s.ApisApi).getAPIVersions();
    assert.deepEqual(groups.groups.map((g) => g.name).sort(), ['config.openshift.io', MCO_GROUP, 'operator.openshift.io', 'policy']);
  });

  it('CRDs prune spec fields their schema does not declare, as a structural schema makes the apiserver do', async () => {
    const created = await custom.createClusterCustomObject({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigpools', body: {
      apiVersion: `${MCO_GROUP}/v1`, kind: 'MachineConfigPool', metadata: { name: 'pruned' },
      spec: { paused: false, driftPolicy: 'Reconcile', disruptionPolicy: { sshkey: { actions: [{ type: 'none' }] } } },
    } });
    assert.deepEqual(created.spec, { paused: false });
    const patched = await custom.patchClusterCustomObject({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigpools', name: 'pruned', body: { spec: { driftPolicy: 'Degrade', maxUnavailable: 2 } } }, merge);
    assert.deepEqual(patched.spec, { paused: false, maxUnavailable: 2 });
    const mc = await custom.createClusterCustomObject({ group: MCO_GROUP, version: 'v1', plural: 'machineconfigs', body: { apiVersion: `${MCO_GROUP}/v1`, kind: 'MachineConfig', metadata: { name: '10-pruned' }, spec: { kernelArgs: ['typo'], kernelArguments: ['a=1'] } } });
    assert.deepEqual(mc.spec, { kernelArguments: ['a=1'] });
  });

  it('logs every request as RBAC sees it (verb, group, resource, subresource, namespace, name, code)', () => {
    const has = (p: Partial<(typeof standIn.requests)[number]>) => standIn.requests.some((r) => Object.entries(p).every(([k, v]) => (r as any)[k] === v));
    assert.ok(has({ verb: 'list', apiGroup: '', resource: 'pods', code: 200 }));
    assert.ok(has({ verb: 'watch', resource: 'nodes' }));
    assert.ok(has({ verb: 'create', resource: 'pods', subresource: 'eviction', namespace: 'evict-a', name: 'db-1', code: 429 }));
    assert.ok(has({ verb: 'update', resource: 'machineconfigpools', subresource: 'status', apiGroup: MCO_GROUP, code: 200 }));
    assert.ok(has({ verb: 'patch', resource: 'nodes', name: 'node-a' }));
    assert.ok(has({ verb: 'get', apiGroup: 'policy', resource: 'poddisruptionbudgets' }));
    assert.ok(has({ verb: 'delete', apiGroup: MCO_GROUP, resource: 'machineconfigs', name: '50-a' }));
  });
});
