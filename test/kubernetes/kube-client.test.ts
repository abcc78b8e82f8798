// Kubernetes credentials: --kubeconfig on the real mcplane-server, in-cluster service account
// files, and the KubernetesAccess the control plane hands its controllers, all against the
// Kubernetes API stand-in with the real @kubernetes/client-node.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { assertCallsAllowed } from './rbac.ts';
import { startKubeApiStandIn, type KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { inClusterAvailable, kubeFailureOf, loadKubernetesAccess, type KubernetesAccess } from '../../src/controlplane/kubernetes/kube-client.ts';
import { ConfigurationError } from '../../src/machineconfig/index.ts';
import { ClusterInformer, customResourceSource, nodeSource } from '../../src/controlplane/kubernetes/cluster-informer.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { resolveOptions } from '../../src/controlplane/main.ts';

import { spawnServer } from '../helpers/server-process.ts';
import { startTestServer } from '../helpers/test-server.ts';
import { testPki } from '../helpers/test-pki.ts';
import { spawnSync } from 'node:child_process';
import { REPO_ROOT } from '../helpers/run-cli.ts';
import { scaled } from '../helpers/time-scale.ts';
import { until } from '../helpers/until.ts';

describe('Kubernetes credentials and KubernetesAccess', () => {
  let standIn: KubeApiStandIn;
  const dir = mkdtempSync(join(tmpdir(), 'kube-client-'));
  let kubeconfig: string;

  before(async () => {
    standIn = await startKubeApiStandIn();
    kubeconfig = standIn.writeKubeconfig(dir);
    standIn.add({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'worker-0', labels: { 'node-role.kubernetes.io/worker': '' } } });
  });
  after(() => standIn.close());

  it('loads a kubeconfig file: the typed clients reach the cluster with its token', async () => {
    const kube = await loadKubernetesAccess({ kubeconfig });
    assert.equal(kube.server, standIn.url);
    assert.equal(kube.credentials, `kubeconfig ${kubeconfig}`);
    assert.equal(kube.namespace, 'default');
    const nodes = await kube.core.listNode();
    assert.deepEqual(nodes.items.map((n) => n.metadata!.name), ['worker-0']);
    const patched = await kube.core.patchNode({ name: 'worker-0', body: { spec: { unschedulable: true } } }, kube.patchAs.merge);
    assert.equal(patched.spec!.unschedulable, true);
    const last = standIn.requests.at(-1)!;
    assert.deepEqual([last.verb, last.resource, last.authenticated], ['patch', 'nodes', true]);
  });

  it('loads in-cluster credentials: KUBERNETES_SERVICE_HOST/PORT and the mounted service account token', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kube-pod-'));
    const env = { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(standIn.port) };
    assert.equal(inClusterAvailable(env, root), false, 'no token mounted yet');
    standIn.writeServiceAccount(root, 'mcplane-system');
    assert.equal(inClusterAvailable(env, root), true);
    assert.equal(inClusterAvailable({}, root), false, 'no service host: not in a cluster');
    const kube = await loadKubernetesAccess({ inCluster: { env, root } });
    assert.equal(kube.credentials, 'in-cluster service account');
    assert.equal(kube.namespace, 'mcplane-system');
    assert.equal(kube.server, `https://127.0.0.1:${standIn.port}`);
    assert.equal((await kube.core.readNode({ name: 'worker-0' })).metadata!.name, 'worker-0');
    assert.equal(process.env.KUBERNETES_SERVICE_HOST, undefined, 'the process environment is left as it was');
  });

  it('bad credentials are a ConfigurationError naming the file and what to do', async () => {
    await assert.rejects(loadKubernetesAccess({ kubeconfig: join(dir, 'missing') }), (err: unknown) =>
      err instanceof ConfigurationError && err.message.startsWith(`--kubeconfig ${join(dir, 'missing')}: `) && /ENOENT/.test(err.message));
    const noContext = join(dir, 'no-context');
    writeFileSync(noContext, JSON.stringify({ apiVersion: 'v1', kind: 'Config', clusters: [], users: [], contexts: [{ name: 'a', context: { cluster: 'x', user: 'y' } }] }));
    await assert.rejects(loadKubernetesAccess({ kubeconfig: noContext }), /no current context with a cluster .*set current-context to one of: a/);
    await assert.rejects(loadKubernetesAccess({ inCluster: { env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: '1' }, root: dir } }),
      /serviceaccount\/token is missing/);
  });

  it('kubeFailureOf reads the apiserver Status out of a failed call, and names a connection failure', async () => {
    const kube = await loadKubernetesAccess({ kubeconfig });
    const notFound = await kube.core.readNode({ name: 'nope' }).then(() => undefined, kubeFailureOf);
    assert.deepEqual(notFound, { code: 404, reason: 'NotFound', message: 'nodes "nope" not found', causes: [] });
    const down = join(dir, 'down');
    const config = JSON.parse(readFileSync(kubeconfig, 'utf8'));
    const free = createServer();
    await new Promise<void>((r) => free.listen(0, '127.0.0.1', () => r()));
    const port = (free.address() as AddressInfo).port;
    await new Promise((r) => free.close(r));
    config.clusters[0].cluster.server = `https://127.0.0.1:${port}`;
    writeFileSync(down, JSON.stringify(config));
    const refused = await (await loadKubernetesAccess({ kubeconfig: down })).core.listNode().then(() => undefined, kubeFailureOf);
    assert.equal(refused!.code, 0);
    assert.match(refused!.message, /ECONNREFUSED/);
  });

  it('the in-process server hands the KubernetesAccess to its control plane', async () => {
    const server = await startTestServer({ kubernetes: { kubeconfig } });
    try {
      const kube = server.handle.controlPlane.kubernetes;
      assert.ok(kube, 'the control plane has the cluster');
      assert.equal(kube.server, standIn.url);
      assert.equal((await kube.core.readNode({ name: 'worker-0' })).metadata!.name, 'worker-0');
      assert.ok(server.logs.some((l) => l.includes('working with a Kubernetes cluster') && l.includes(standIn.url)));
    } finally {
      await server.close();
    }
    const plain = await startTestServer();
    try {
      assert.equal(plain.handle.controlPlane.kubernetes, undefined, 'no kubeconfig: no Kubernetes');
    } finally {
      await plain.close();
    }
  });

  it('server.yaml takes kubeconfig and kubernetesSource as the flags do; the flags win', () => {
    const file = join(dir, 'server.yaml');
    writeFileSync(file, `kubeconfig: ${kubeconfig}\nkubernetesSource: true\n`);
    const fromFile = resolveOptions({ config: file });
    assert.deepEqual(fromFile.kubernetes, { kubeconfig });
    assert.equal(fromFile.kubernetesSource, true);
    assert.deepEqual(resolveOptions({ config: file, kubeconfig: '/elsewhere' }).kubernetes, { kubeconfig: '/elsewhere' });
    assert.equal(resolveOptions({}).kubernetes, undefined, 'no kubeconfig and not in a pod: no Kubernetes');
  });

  it('mcplane-server --kubeconfig: starts and says which cluster; a bad file stops it with the file named', async () => {
    const pki = await testPki();
    const data = mkdtempSync(join(tmpdir(), 'kube-server-'));
    const server = await spawnServer(['--data-dir', data, '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap', '--kubeconfig', kubeconfig]);
    try {
      assert.ok(server.logs.some((l) => l.includes('working with a Kubernetes cluster') && l.includes(`kubeconfig ${kubeconfig}`)), server.logs.join('\n'));
    } finally {
      // main.ts installs its SIGTERM handler just after "ready" is logged; a signal in between
      // kills the process outright (a start-up race the k8s-drain branch closes).
      await new Promise((r) => setTimeout(r, 500));
      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0);
    }
    const bad = spawnSync(process.execPath, ['--import', 'tsx', 'src/controlplane/main.ts', '--data-dir', data, '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap', '--kubeconfig', join(dir, 'nope.yaml')],
      { cwd: REPO_ROOT, encoding: 'utf8', timeout: scaled(30_000) });
    assert.equal(bad.status, 1);
    assert.match(bad.stderr + bad.stdout, new RegExp(`--kubeconfig ${join(dir, 'nope.yaml').replace(/[.]/g, '\\.')}: ENOENT`));
  });

  it('the informer resumes a watch client-node ended for being idle, without calling it a failure', async () => {
    const logs: string[] = [];
    const log = createLogger({ level: 'debug', write: (line) => logs.push(line) });
    const kube = await loadKubernetesAccess({ kubeconfig, watchIdleTimeoutMs: 200 });
    const informer = new ClusterInformer(kube, customResourceSource(kube, { group: 'machineconfiguration.openshift.io', version: 'v1', plural: 'machineconfigs' }), log);
    informer.start();
    try {
      await until(() => informer.synced, 'informer.synced');
      const watchesBefore = standIn.requests.filter((r) => r.verb === 'watch' && r.resource === 'machineconfigs').length;
      await new Promise((r) => setTimeout(r, 700)); // several idle timeouts
      standIn.add({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig', metadata: { name: '10-after-idle' }, spec: {} });
      await until(() => informer.objects.has('10-after-idle'), "informer.objects.has('10-after-idle')");
      assert.ok(standIn.requests.filter((r) => r.verb === 'watch' && r.resource === 'machineconfigs').length > watchesBefore + 1, 'resumed after each idle end');
      assert.equal(logs.filter((l) => /cannot watch/.test(l)).length, 0, logs.join('\n'));
      assert.equal(standIn.requests.filter((r) => r.verb === 'list' && r.resource === 'machineconfigs').length, 1, 'an idle end is resumed, not relisted');
    } finally {
      informer.stop();
    }
  });

  // Nodes and MCO's resources share the informer: a 403 or 500 loop is backed off for both.
  for (const [resource, source, add] of [
    ['machineconfigpools', (k: KubernetesAccess) => customResourceSource(k, { group: 'machineconfiguration.openshift.io', version: 'v1', plural: 'machineconfigpools' }),
      () => standIn.add({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfigPool', metadata: { name: 'after-error' }, spec: {} })],
    ['nodes', nodeSource, () => standIn.add({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'after-error' }, spec: {} } as never)],
  ] as const) {
    it(`the ${resource} informer backs off when the cluster ends its watch with an error event, instead of asking again at once`, async () => {
      const logs: string[] = [];
      const log = createLogger({ level: 'debug', write: (line) => logs.push(line) });
      const kube = await loadKubernetesAccess({ kubeconfig });
      const informer = new ClusterInformer<{ metadata?: { name?: string } }>(kube, source(kube), log);
      const events: string[] = [];
      informer.on('event', (type, object) => events.push(`${type} ${object.metadata?.name}`));
      const start = standIn.requests.length;
      informer.start();
      try {
        await until(() => informer.synced, 'informer.synced');
        const watches = () => standIn.requests.slice(start).filter((r) => r.verb === 'watch' && r.resource === resource);
        await until(() => watches().length === 1, 'watches().length === 1');
        const t0 = Date.now();
        standIn.failWatches(500, 'InternalError', 'etcdserver: leader changed');
        await until(() => watches().length === 2, 'watches().length === 2');
        assert.ok(Date.now() - t0 >= 150, `asked again after ${Date.now() - t0} ms`);
        assert.ok(logs.some((l) => new RegExp(`cannot watch ${resource}`).test(l) && /etcdserver: leader changed/.test(l)), logs.join('\n'));
        add();
        await until(() => informer.objects.has('after-error'), "informer.objects.has('after-error')");
        assert.ok(events.includes('ADDED after-error'), events.join(', '));
      } finally {
        informer.stop();
      }
    });
  }

  it('the informer resumes watches that keep ending at once ever more slowly, not in a tight loop', async () => {
    const kube = await loadKubernetesAccess({ kubeconfig });
    const informer = new ClusterInformer(kube, nodeSource(kube), createLogger({ level: 'silent' }));
    const start = standIn.requests.length;
    informer.start();
    try {
      await until(() => informer.synced, 'informer.synced');
      const watches = () => standIn.requests.slice(start).filter((r) => r.verb === 'watch' && r.resource === 'nodes').length;
      await until(() => watches() === 1, 'watches() === 1');
      // A proxy that closes every watch as soon as it opens, for a second.
      const closer = setInterval(() => standIn.closeWatches(), 5);
      await new Promise((r) => setTimeout(r, 1000));
      clearInterval(closer);
      assert.ok(watches() < 20, `${watches()} watches in a second`);
      assert.ok(watches() > 3, 'it kept resuming');
      standIn.add({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'after-quick-ends' }, spec: {} } as never);
      await until(() => informer.objects.has('after-quick-ends'), "informer.objects.has('after-quick-ends')");
    } finally {
      informer.stop();
    }
  });

  it("every call it made to the cluster with mcplane's credentials is allowed by packaging/kubernetes/rbac.yaml", () => {
    assert.ok(assertCallsAllowed(standIn.requests) > 0);
  });
});
