// mcctl import --kubeconfig: a one-shot import of a cluster shaped like a real OpenShift one
// (the Kubernetes API stand-in, read by the real @kubernetes/client-node) into a control plane
// through ConfigService.Apply, run as a user runs mcctl (a separate process).

import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { assertCallsAllowed } from './rbac.ts';
import { startKubeApiStandIn, type KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { readDocuments } from '../../src/machineconfig/index.ts';
import { REPO_ROOT, runCliAsync } from '../helpers/run-cli.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { openshiftClusterObjects } from './openshift-cluster-objects.ts';

const IMPORTED = [
  'machineconfigpool/master', 'machineconfigpool/worker', 'machineconfigpool/infra',
  'machineconfig/00-master', 'machineconfig/00-worker', 'machineconfig/50-examplecorp-chrony',
  'machineconfig/99-master-ssh', 'machineconfig/99-worker-generated-registries', 'machineconfig/99-worker-ssh',
];

describe('mcctl import --kubeconfig (the path off MCO)', () => {
  let standIn: KubeApiStandIn;
  let server: TestServer;
  let kubeconfig: string;
  let env: NodeJS.ProcessEnv;
  const dir = mkdtempSync(join(tmpdir(), 'mcctl-import-'));

  before(async () => {
    standIn = await startKubeApiStandIn();
    for (const o of openshiftClusterObjects()) standIn.add(o);
    kubeconfig = standIn.writeKubeconfig(dir);
    server = await startTestServer();
    env = { MCPLANE_SERVER: server.address, MCPLANE_PKI_DIR: server.pki.dir };
  });
  after(async () => {
    await server?.close();
    await standIn?.close();
  });

  const cache = () => server.handle.controlPlane.cache;
  const lines = (text: string) => text.trim().split('\n').sort();

  it('--dry-run: prints what Apply would do, says which rendered configs it skips, stores nothing', async () => {
    const r = await runCliAsync(['import', '--kubeconfig', kubeconfig, '--dry-run'], { env });
    assert.equal(r.status, 0, r.stderr);
    // master and worker exist from the start in mcplane; the cluster's differ (MCO's labels).
    assert.deepEqual(lines(r.stdout), IMPORTED.map((o) => `${o} ${o === 'machineconfigpool/master' || o === 'machineconfigpool/worker' ? 'configured' : 'created'} (dry run)`).sort());
    assert.match(r.stderr, /^skipped machineconfig\/rendered-master-[0-9a-f]{32}: MCO's rendered config \(mcplane renders its own\)$/m);
    assert.match(r.stderr, /^skipped machineconfig\/rendered-worker-[0-9a-f]{32}: MCO's rendered config/m);
    assert.equal(cache().configs.size, 0);
    assert.equal(cache().pools.has('infra'), false);
    // MachineConfigs and pools, and the higher-level configs (KubeletConfig, Image, mirror sets...).
    // The stand-in has no MachineConfigNode CRD (a cluster before OpenShift 4.19): that list is 404, and import compares none.
    assert.ok(standIn.requests.filter((q) => q.verb === 'list').every((q) => ['machineconfiguration.openshift.io', 'config.openshift.io', 'operator.openshift.io'].includes(q.apiGroup ?? '') && (q.code === 200 || (q.resource === 'machineconfignodes' && q.code === 404))));
  });

  it('imports the cluster: created, rendered from the cluster\'s configs; again: unchanged', async () => {
    const r = await runCliAsync(['import', '--kubeconfig', kubeconfig], { env });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(lines(r.stdout), IMPORTED.map((o) => `${o} ${o === 'machineconfigpool/master' || o === 'machineconfigpool/worker' ? 'configured' : 'created'}`).sort());
    assert.deepEqual([...cache().configs.keys()].sort(), ['00-master', '00-worker', '50-examplecorp-chrony', '99-master-ssh', '99-worker-generated-registries', '99-worker-ssh']);
    assert.equal(cache().configs.has('rendered-worker-6f6a6c1b0cd1d8f9e3a1b2c3d4e5f607'), false);
    assert.deepEqual(cache().poolStatuses.get('worker')!.value.targetSources, ['00-worker', '50-examplecorp-chrony', '99-worker-generated-registries', '99-worker-ssh']);
    assert.deepEqual(cache().poolStatuses.get('infra')!.value.targetSources, ['00-worker', '50-examplecorp-chrony', '99-worker-generated-registries', '99-worker-ssh']);
    assert.equal(cache().pools.get('worker')!.value.metadata.labels?.['machineconfiguration.openshift.io/mco-built-in'], '');
    const again = await runCliAsync(['import', '--kubeconfig', kubeconfig], { env });
    assert.equal(again.status, 0, again.stderr);
    assert.deepEqual(lines(again.stdout), IMPORTED.map((o) => `${o} unchanged`).sort());
  });

  it('an invalid object in the cluster fails the whole import with every problem, and stores nothing of it', async () => {
    standIn.add({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig', metadata: { name: '90-bad', labels: { 'machineconfiguration.openshift.io/role': 'worker' } }, spec: { kernelType: 'turbo' } });
    standIn.add({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig', metadata: { name: '91-good' }, spec: { kernelArguments: ['a=1'] } });
    const r = await runCliAsync(['import', '--kubeconfig', kubeconfig], { env });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /error: invalid document: 1 problem\n {2}- kubernetes#0: MachineConfig\/90-bad: spec\.kernelType: unknown kernelType "turbo"; expected one of: default, realtime, 64k-pages \[kernel-type\]/);
    assert.equal(cache().configs.has('91-good'), false, 'all or nothing');
    standIn.remove('MachineConfig', '90-bad');
    standIn.remove('MachineConfig', '91-good');
  });

  it('names the file or the cluster when it cannot read them', async () => {
    const missing = await runCliAsync(['import', '--kubeconfig', join(dir, 'nope')], { env });
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /--kubeconfig .*nope: ENOENT/);
    const wrongToken = join(dir, 'wrong-token');
    writeFileSync(wrongToken, readFileSync(kubeconfig, 'utf8').replace(standIn.token, 'not-the-token'));
    const refused = await runCliAsync(['import', '--kubeconfig', wrongToken], { env });
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, new RegExp(`cannot list machineconfigpools\\.machineconfiguration\\.openshift\\.io at ${standIn.url.replace(/\./g, '\\.')} \\(kubeconfig .*wrong-token\\): the cluster rejected the credentials \\(401\\)`));
  });

  it("every call it made to the cluster with mcplane's credentials is allowed by packaging/kubernetes/rbac.yaml", () => {
    assert.ok(assertCallsAllowed(standIn.requests) > 0);
  });
});

describe('mcctl import of the project\'s examples as a cluster stores them (YAML 1.1 read, JSON served)', () => {
  it('imports every MachineConfig and MachineConfigPool of examples/ unmodified', async () => {
    const standIn = await startKubeApiStandIn();
    const server = await startTestServer();
    try {
      const expected: string[] = [];
      for (const file of readdirSync(join(REPO_ROOT, 'examples')).filter((f) => f.endsWith('.yaml'))) {
        // What `oc apply -f` sends: the YAML read as Kubernetes reads it (mode 0644 is 420).
        const { documents } = readDocuments(readFileSync(join(REPO_ROOT, 'examples', file), 'utf8'), file);
        for (const { value } of documents) {
          if (value.kind !== 'MachineConfig' && value.kind !== 'MachineConfigPool') continue;
          standIn.add(value as { kind: string; metadata: object });
          expected.push(`${String(value.kind).toLowerCase()}/${(value.metadata as { name: string }).name}`);
        }
      }
      const kubeconfig = standIn.writeKubeconfig(mkdtempSync(join(tmpdir(), 'mcctl-import-examples-')));
      const r = await runCliAsync(['import', '--kubeconfig', kubeconfig], { env: { MCPLANE_SERVER: server.address, MCPLANE_PKI_DIR: server.pki.dir } });
      assert.equal(r.status, 0, r.stderr);
      assert.deepEqual(r.stdout.trim().split('\n').map((l) => l.split(' ')[0]).sort(), expected.sort());
      const chrony = server.handle.controlPlane.cache.configs.get('50-examplecorp-chrony')!.value;
      assert.equal(chrony.spec.config.storage?.files?.[0]?.mode, 420);
      assert.ok(server.handle.controlPlane.cache.poolStatuses.get('infra')!.value.targetSources.includes('50-infra'));
    } finally {
      await server.close();
      await standIn.close();
    }
  });
});

