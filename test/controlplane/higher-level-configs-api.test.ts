// KubeletConfig, ContainerRuntimeConfig and the registries sources over real gRPC: Apply stores
// them, the leader generates MCO's `99-<pool>-generated-*` MachineConfigs (owned by their source,
// rendered into the pool, deleted with the source), and ListSourceObjects reports MCO's status
// conditions. Generation follows machine-config-operator 7ff337a4
// pkg/controller/kubelet-config/kubelet_config_controller.go (syncKubeletConfig) and
// pkg/controller/container-runtime-config/container_runtime_config_controller.go
// (syncContainerRuntimeConfig, syncImageConfig).

import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { parse as parseYaml, stringify } from 'yaml';
import { call } from '../../src/cli/client/call.ts';
import { RemoteCallError } from '../../src/machineconfig/index.ts';
import { fileEntry, ign, mcDoc } from '../helpers/manifests.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { server, c } = serverFixture();

const apply = (...docs: Record<string, unknown>[]) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'hl.yaml', text: docs.map((d) => stringify(d)).join('---\n') }], dryRun: false }, 'apply');
const del = (kind: string, name: string) => call(c, c.config.delete.bind(c.config), { kind, name }, 'delete');
const getMc = async (name: string) => JSON.parse((await call(c, c.config.getMachineConfig.bind(c.config), { name }, 'get mc')).manifestJson);
const mcNames = async () => (await call(c, c.config.listMachineConfigs.bind(c.config), {}, 'list mc')).machineConfigs.map((m) => m.name);
const sources = async (kind: string) => (await call(c, c.config.listSourceObjects.bind(c.config), { kind }, 'list')).objects.map((o) => ({ name: o.name, ...JSON.parse(o.statusJson) }));
const fileOf = (mc: { spec: { config: { storage: { files: { path: string; contents: { source: string } }[] } } } }, path: string): string | undefined => {
  const f = mc.spec.config.storage.files.find((x) => x.path === path);
  return f ? Buffer.from(f.contents.source.replace(/^data:[^,]*;base64,/, ''), 'base64').toString() : undefined;
};
async function renderedSources(pool: string): Promise<string[]> {
  const p = await call(c, c.status.getPool.bind(c.status), { name: pool }, 'get pool');
  return (await call(c, c.config.getRenderedConfig.bind(c.config), { name: p.status!.configuration }, 'get rendered')).sources;
}

const WORKER = { matchLabels: { 'pools.operator.machineconfiguration.openshift.io/worker': '' } };
const kubeletConfig = (name: string, spec: Record<string, unknown>, selector: Record<string, unknown> = WORKER) => ({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'KubeletConfig', metadata: { name }, spec: { machineConfigPoolSelector: selector, ...spec } });
const REGISTRIES = 'unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]\n';
const POLICY = '{"default":[{"type":"insecureAcceptAnything"}],"transports":{"docker-daemon":{"":[{"type":"insecureAcceptAnything"}]}}}';

test('a KubeletConfig becomes 99-worker-generated-kubelet over the pool\'s kubelet.conf, owned, rendered, reported Accepted', async () => {
  await apply(
    mcDoc('01-worker-kubelet', 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry('/etc/kubernetes/kubelet.conf', 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 250\n')] } }) }),
    mcDoc('01-worker-container-runtime', 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry('/etc/containers/registries.conf', REGISTRIES), fileEntry('/etc/containers/policy.json', POLICY)] } }) }),
    mcDoc('01-master-container-runtime', 'master', { config: ign('3.4.0', { storage: { files: [fileEntry('/etc/containers/registries.conf', REGISTRIES), fileEntry('/etc/containers/policy.json', POLICY)] } }) }),
  );
  const applied = await apply(kubeletConfig('set-max-pods', { kubeletConfig: { maxPods: 500 }, logLevel: 4 }));
  assert.deepEqual(applied.objects.map((o) => `${o.kind}/${o.name}:${o.action}`), ['KubeletConfig/set-max-pods:created']);
  // Apply answers once the pool rendered with the generated config.
  assert.ok((await renderedSources('worker')).includes('99-worker-generated-kubelet'));
  const mc = await getMc('99-worker-generated-kubelet');
  assert.deepEqual(mc.metadata.ownerReferences, [{ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'KubeletConfig', name: 'set-max-pods', controller: true, blockOwnerDeletion: true }]);
  assert.equal(mc.metadata.labels['machineconfiguration.openshift.io/role'], 'worker');
  assert.match(fileOf(mc, '/etc/kubernetes/kubelet.conf')!, /^maxPods: 500$/m);
  assert.equal(fileOf(mc, '/etc/systemd/system/kubelet.service.d/20-logging.conf'), '[Service]\nEnvironment="KUBELET_LOG_LEVEL=4"\n');
  assert.deepEqual(await sources('KubeletConfig'), [{ name: 'set-max-pods', conditions: [{ type: 'Accepted', status: 'True', message: 'Success' }, { type: 'Success', status: 'True', message: 'Success' }], generated: ['99-worker-generated-kubelet'], problems: [] }]);

  // A second one for the pool is generated apart (never merged with the first): -1.
  await apply(kubeletConfig('set-pids', { kubeletConfig: { podPidsLimit: 8192 } }));
  const second = await getMc('99-worker-generated-kubelet-1');
  assert.match(fileOf(second, '/etc/kubernetes/kubelet.conf')!, /^podPidsLimit: 8192$/m);
  assert.match(fileOf(second, '/etc/kubernetes/kubelet.conf')!, /^maxPods: 250$/m);

  // Deleted with its source, and the pool re-rendered without it.
  await del('KubeletConfig', 'set-pids');
  assert.ok(!(await mcNames()).includes('99-worker-generated-kubelet-1'));
  assert.ok(!(await renderedSources('worker')).includes('99-worker-generated-kubelet-1'));
});

test('MCO\'s refusals are INVALID_ARGUMENT naming object, field and rule; a pool with no kubelet.conf is a Failure condition', async () => {
  await assert.rejects(apply(kubeletConfig('bad', { kubeletConfig: { cgroupDriver: 'cgroupfs' }, logLevel: 12 })), (e: RemoteCallError) => {
    assert.equal(e.grpcCode, Status.INVALID_ARGUMENT);
    assert.deepEqual(e.problems.map((p) => `${p.object} ${p.field} ${p.rule}`), ['KubeletConfig/bad spec.logLevel log-level-range', 'KubeletConfig/bad spec.kubeletConfig.cgroupDriver kubelet-field-refused']);
    return true;
  });
  await apply(kubeletConfig('master-max-pods', { kubeletConfig: { maxPods: 300 } }, { matchLabels: { 'pools.operator.machineconfiguration.openshift.io/master': '' } }));
  const [status] = (await sources('KubeletConfig')).filter((s) => s.name === 'master-max-pods');
  assert.equal(status.conditions[0].status, 'False');
  assert.equal(status.conditions[1].type, 'Failure');
  assert.match(status.conditions[0].message, /^Error: no MachineConfig of pool master provides \/etc\/kubernetes\/kubelet\.conf/);
  assert.equal(status.problems[0].rule, 'base-config-missing');
  assert.ok(!(await mcNames()).includes('99-master-generated-kubelet'));
  await del('KubeletConfig', 'master-max-pods');
});

test('a KubeletConfig is read as MCO decodes it: a wrong type is refused, keys fold to their field, a key that is no field is dropped with a warning, durations are written as Go writes them', async () => {
  await assert.rejects(apply(kubeletConfig('typed', { kubeletConfig: { maxPods: '500', evictionHard: { 'memory.available': 5 } } })), (e: RemoteCallError) => {
    assert.equal(e.grpcCode, Status.INVALID_ARGUMENT);
    assert.deepEqual(e.problems.map((p) => `${p.object} ${p.field} ${p.rule}`), ['KubeletConfig/typed spec.kubeletConfig.maxPods kubelet-config-type', 'KubeletConfig/typed spec.kubeletConfig.evictionHard.memory.available kubelet-config-type']);
    assert.match(e.problems[0]!.message, /maxPods must be int32, got string "500"/);
    return true;
  });
  assert.ok(!(await sources('KubeletConfig')).some((s) => s.name === 'typed'), 'nothing of the refused request is stored');

  const applied = await apply(kubeletConfig('typed', { kubeletConfig: { MaxPods: 320, imageMinimumGCAge: '5m', maxPod: 12 } }));
  assert.deepEqual(applied.warnings, ['KubeletConfig/typed: spec.kubeletConfig.maxPod is not a KubeletConfiguration field, so it is left out of kubelet.conf (as MCO leaves it out); check its spelling']);
  const conf = fileOf(await getMc('99-worker-generated-kubelet-1'), '/etc/kubernetes/kubelet.conf')!;
  assert.match(conf, /^maxPods: 320$/m);
  assert.match(conf, /^imageMinimumGCAge: 5m0s$/m);
  assert.doesNotMatch(conf, /maxPod:|MaxPods/);
  // Written whole, as EncodeKubeletConfig writes the struct.
  assert.match(conf, /^syncFrequency: 0s$/m);
  assert.match(conf, /^memorySwap: \{\}$/m);
  await del('KubeletConfig', 'typed');
});

test('a KubeletConfig\'s tlsSecurityProfile sets the generated kubelet.conf\'s tlsMinVersion and IANA tlsCipherSuites (MCO GetSecurityProfileCiphers); an unknown type is INVALID_ARGUMENT', async () => {
  await apply(kubeletConfig('tls-custom', { tlsSecurityProfile: { type: 'Custom', custom: { minTLSVersion: 'VersionTLS12', ciphers: ['ECDHE-RSA-AES128-GCM-SHA256', 'AES256-SHA256', 'ECDHE-RSA-CHACHA20-POLY1305'] } } }));
  const [status] = (await sources('KubeletConfig')).filter((s) => s.name === 'tls-custom');
  assert.equal(status.conditions[0].status, 'True');
  const conf = parseYaml(fileOf(await getMc(status.generated[0]), '/etc/kubernetes/kubelet.conf')!);
  // AES256-SHA256 is one Go cannot negotiate: library-go drops it.
  assert.deepEqual([conf.tlsMinVersion, conf.tlsCipherSuites, conf.maxPods], ['VersionTLS12', ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256'], 250]);
  await apply(kubeletConfig('tls-custom', { tlsSecurityProfile: { type: 'Modern', modern: {} } }));
  const modern = parseYaml(fileOf(await getMc(status.generated[0]), '/etc/kubernetes/kubelet.conf')!);
  assert.deepEqual([modern.tlsMinVersion, modern.tlsCipherSuites], ['VersionTLS13', ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256']]);
  await assert.rejects(apply(kubeletConfig('tls-bad', { tlsSecurityProfile: { type: 'Strict', custom: { minTLSVersion: 'VersionTLS14' } } })), (e: RemoteCallError) => {
    assert.equal(e.grpcCode, Status.INVALID_ARGUMENT);
    assert.deepEqual(e.problems.map((p) => `${p.object} ${p.field} ${p.rule}`), ['KubeletConfig/tls-bad spec.tlsSecurityProfile.type tls-profile-type', 'KubeletConfig/tls-bad spec.tlsSecurityProfile.custom.minTLSVersion tls-min-version']);
    return true;
  });
  await del('KubeletConfig', 'tls-custom');
  assert.ok(!(await mcNames()).includes(status.generated[0]));
});

test('a ContainerRuntimeConfig becomes 99-worker-generated-containerruntime with one CRI-O drop-in per field', async () => {
  await apply({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'ContainerRuntimeConfig', metadata: { name: 'set-pids' }, spec: { machineConfigPoolSelector: WORKER, containerRuntimeConfig: { pidsLimit: 2048, logLevel: 'debug', additionalArtifactStores: [{ path: '/mnt/ssd-artifacts' }] } } });
  const mc = await getMc('99-worker-generated-containerruntime');
  assert.equal(fileOf(mc, '/etc/crio/crio.conf.d/01-ctrcfg-pidsLimit'), '[crio]\n  [crio.runtime]\n    pids_limit = 2048\n');
  assert.equal(fileOf(mc, '/etc/crio/crio.conf.d/01-ctrcfg-logLevel'), '[crio]\n  [crio.runtime]\n    log_level = "debug"\n');
  // AdditionalStorageConfig is on in MCO's Default feature set: the artifact stores get their drop-in.
  assert.equal(fileOf(mc, '/etc/crio/crio.conf.d/01-ctrcfg-additionalArtifactStores'), '[crio]\n  [crio.runtime]\n    additional_artifact_stores = ["/mnt/ssd-artifacts"]\n');
  assert.deepEqual((await sources('ContainerRuntimeConfig'))[0].conditions, [{ type: 'Success', status: 'True', message: 'Success' }]);
});

test('an ImageDigestMirrorSet becomes 99-<pool>-generated-registries for master and worker; the Image config\'s blocked registries too', async () => {
  await apply({ apiVersion: 'config.openshift.io/v1', kind: 'ImageDigestMirrorSet', metadata: { name: 'ubi' }, spec: { imageDigestMirrors: [{ source: 'registry.access.redhat.com/ubi9/ubi-minimal', mirrors: ['example.io/example/ubi-minimal'] }] } });
  const names = await mcNames();
  assert.ok(names.includes('99-worker-generated-registries') && names.includes('99-master-generated-registries'));
  const worker = await getMc('99-worker-generated-registries');
  assert.match(fileOf(worker, '/etc/containers/registries.conf')!, /\[\[registry\]\]\n {2}prefix = ""\n {2}location = "registry.access.redhat.com\/ubi9\/ubi-minimal"\n\n {2}\[\[registry.mirror\]\]\n {4}location = "example.io\/example\/ubi-minimal"\n {4}pull-from-mirror = "digest-only"\n/);
  assert.ok((await renderedSources('worker')).includes('99-worker-generated-registries'));

  await apply({ apiVersion: 'config.openshift.io/v1', kind: 'Image', metadata: { name: 'cluster' }, spec: { registrySources: { blockedRegistries: ['blocked.io'] } } });
  const withImage = await getMc('99-worker-generated-registries');
  assert.deepEqual(withImage.metadata.ownerReferences.map((o: { kind: string }) => o.kind), ['Image']);
  assert.match(fileOf(withImage, '/etc/containers/registries.conf')!, /location = "blocked.io"\n {2}blocked = true/);
  assert.deepEqual(JSON.parse(fileOf(withImage, '/etc/containers/policy.json')!).transports.docker, { 'blocked.io': [{ type: 'reject' }] });
  assert.deepEqual((await sources('Image'))[0].conditions, [{ type: 'Success', status: 'True', message: 'Success' }]);

  // Two sets disagreeing on a source's policy: every registries source reports the Failure
  // naming the set and rule, and the registries configs in place stay as they were.
  const before = await getMc('99-worker-generated-registries');
  await apply({ apiVersion: 'config.openshift.io/v1', kind: 'ImageDigestMirrorSet', metadata: { name: 'ubi-never' }, spec: { imageDigestMirrors: [{ source: 'registry.access.redhat.com/ubi9/ubi-minimal', mirrors: ['other.io/ubi-minimal'], mirrorSourcePolicy: 'NeverContactSource' }] } });
  const failed = (await sources('ImageDigestMirrorSet')).find((s) => s.name === 'ubi')!;
  assert.equal(failed.conditions[0].type, 'Failure');
  assert.deepEqual(failed.problems.map((p: { object: string; rule: string }) => `${p.object} ${p.rule}`), ['ImageDigestMirrorSet/ubi-never conflicting-mirror-source-policy']);
  assert.deepEqual(await getMc('99-worker-generated-registries'), before);
  await del('ImageDigestMirrorSet', 'ubi-never');
  await del('Image', 'cluster');
  await del('ImageDigestMirrorSet', 'ubi');
  assert.ok(!(await mcNames()).some((n) => n.endsWith('-generated-registries')));
});

test('a ClusterImagePolicy puts its sigstore requirement into policy.json and its scope and mirrors into sigstore-registries.yaml; a scope outside the allowed registries is a Failure', async () => {
  const pem = Buffer.from(`-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE${'A'.repeat(40)}\n-----END PUBLIC KEY-----\n`).toString('base64');
  const policy = { apiVersion: 'config.openshift.io/v1', kind: 'ClusterImagePolicy', metadata: { name: 'signed-apps' }, spec: { scopes: ['quay.io/team'], policy: { rootOfTrust: { policyType: 'PublicKey', publicKey: { keyData: pem } } } } };
  await apply(policy, { apiVersion: 'config.openshift.io/v1', kind: 'ImageDigestMirrorSet', metadata: { name: 'team' }, spec: { imageDigestMirrors: [{ source: 'quay.io/team', mirrors: ['mirror.local/team'] }] } });
  const mc = await getMc('99-worker-generated-registries');
  assert.deepEqual(mc.spec.config.storage.files.map((f: { path: string }) => f.path), ['/etc/containers/registries.conf', '/etc/containers/policy.json', '/etc/containers/registries.d/sigstore-registries.yaml']);
  assert.deepEqual(JSON.parse(fileOf(mc, '/etc/containers/policy.json')!).transports.docker, { 'quay.io/team': [{ type: 'sigstoreSigned', keyData: pem, signedIdentity: { type: 'matchRepoDigestOrExact' } }] });
  assert.equal(fileOf(mc, '/etc/containers/registries.d/sigstore-registries.yaml'), 'docker:\n  mirror.local/team:\n    use-sigstore-attachments: true\n  quay.io/team:\n    use-sigstore-attachments: true\n');
  assert.deepEqual(mc.metadata.ownerReferences.map((o: { kind: string; name: string }) => `${o.kind}/${o.name}`), ['ImageDigestMirrorSet/team', 'ClusterImagePolicy/signed-apps'], 'without an Image config, the sources hold it together');
  assert.ok((await renderedSources('master')).includes('99-master-generated-registries'));

  // Allowed registries that do not hold the policy's scope: MCO's validation fails the registries
  // config, every registries source says why, and the configs in place stay.
  const before = await getMc('99-worker-generated-registries');
  await apply({ apiVersion: 'config.openshift.io/v1', kind: 'Image', metadata: { name: 'cluster' }, spec: { registrySources: { allowedRegistries: ['registry.redhat.io'] } } });
  const [status] = (await sources('ClusterImagePolicy')).filter((x) => x.name === 'signed-apps');
  assert.equal(status.conditions[0].type, 'Failure');
  assert.match(status.problems[0].message, /clusterimagePolicy configured for the scope quay\.io\/team is not nested inside allowedRegistries/);
  assert.deepEqual(await getMc('99-worker-generated-registries'), before);

  await del('Image', 'cluster');
  await del('ClusterImagePolicy', 'signed-apps');
  assert.deepEqual((await getMc('99-worker-generated-registries')).spec.config.storage.files.map((f: { path: string }) => f.path), ['/etc/containers/registries.conf'], 'the policy gone, its files go');
  await del('ImageDigestMirrorSet', 'team');
});

test('a CRIOCredentialProviderConfig becomes 97-<pool>-generated-credentialproviderconfig: the generic file and the kubelet drop-in, or no file without images', async () => {
  const credentialProvider = (spec?: Record<string, unknown>) => ({ apiVersion: 'config.openshift.io/v1', kind: 'CRIOCredentialProviderConfig', metadata: { name: 'cluster' }, ...(spec ? { spec } : {}) });
  await apply(credentialProvider({ matchImages: ['quay.io', 'registry.example.com:5000'] }));
  const mc = await getMc('97-worker-generated-credentialproviderconfig');
  assert.deepEqual(mc.spec.config.storage.files.map((f: { path: string }) => f.path), ['/etc/kubernetes/credential-providers/generic-credential-provider.yaml', '/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf']);
  assert.match(fileOf(mc, '/etc/kubernetes/credential-providers/generic-credential-provider.yaml')!, /^ {2}matchImages:\n {2}- quay\.io\n {2}- registry\.example\.com:5000\n {2}name: crio-credential-provider$/m);
  assert.deepEqual(mc.metadata.ownerReferences.map((o: { kind: string; name: string }) => `${o.kind}/${o.name}`), ['CRIOCredentialProviderConfig/cluster']);
  assert.ok((await renderedSources('master')).includes('97-master-generated-credentialproviderconfig'));
  assert.deepEqual((await sources('CRIOCredentialProviderConfig'))[0].conditions, [
    { type: 'Validated', status: 'True', reason: 'Succeeded', message: 'Success' },
    { type: 'MachineConfigRendered', status: 'True', reason: 'MachineConfigRenderingSucceeded', message: 'Success' },
  ]);

  // A pool whose configs carry the platform's file (here GCP's): it is edited, the images another
  // provider covers are left out and named; a broken one is a MachineConfigRendered=False.
  const gcr = '/etc/kubernetes/credential-providers/gcr-credential-provider.yaml';
  const platform = (text: string) => mcDoc('01-worker-credential-provider', 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry(gcr, text)] } }) });
  await apply(platform('apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: gcr-credential-provider\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n    matchImages: ["gcr.io", "*.gcr.io"]\n    defaultCacheDuration: "1m"\n'), credentialProvider({ matchImages: ['quay.io', 'gcr.io'] }));
  const edited = await getMc('97-worker-generated-credentialproviderconfig');
  assert.deepEqual(edited.spec.config.storage.files.map((f: { path: string }) => f.path), [gcr]);
  assert.deepEqual(parseYaml(fileOf(edited, gcr)!).providers.map((p: { name: string; matchImages: string[] }) => `${p.name}: ${p.matchImages.join(',')}`), ['gcr-credential-provider: gcr.io,*.gcr.io', 'crio-credential-provider: quay.io']);
  assert.deepEqual((await sources('CRIOCredentialProviderConfig'))[0].conditions[0], { type: 'Validated', status: 'False', reason: 'ConfigurationPartiallyApplied', message: 'CRIOCredentialProviderConfig has one or multiple entries that overlap with the original credential provider config. Skip rendering entries: [gcr.io].' });
  await apply(platform('providers: not-a-list\n'));
  const [broken] = await sources('CRIOCredentialProviderConfig');
  assert.deepEqual(broken.conditions.map((c: { type: string; status: string }) => `${c.type}=${c.status}`), ['MachineConfigRendered=False']);
  assert.match(broken.conditions[0].message, /^could not generate CRIOCredentialProvider Ignition config: pool worker's \/etc\/kubernetes\/credential-providers\/gcr-credential-provider\.yaml: providers must be a list$/);
  assert.deepEqual(await getMc('97-worker-generated-credentialproviderconfig'), edited, 'the config in place stays');
  await del('MachineConfig', '01-worker-credential-provider');

  // No images: MCO still writes the config, with no file.
  await apply(credentialProvider({}));
  assert.deepEqual((await getMc('97-worker-generated-credentialproviderconfig')).spec.config.storage.files, []);
  await del('CRIOCredentialProviderConfig', 'cluster');
  assert.ok(!(await mcNames()).some((n) => n.endsWith('-generated-credentialproviderconfig')));
});

test('apply --dry-run of a mirror set previews the generated registries config and names MCO\'s rule per node', async () => {
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('worker-0', 'worker'), name: 'worker-0', autoDone: true, labels: { 'node-role.kubernetes.io/worker': '' } });
  await agent.connect();
  try {
    await eventually(async () => {
      const n = await call(c, c.status.getNode.bind(c.status), { name: 'worker-0' }, 'get node');
      const p = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool');
      return n.status!.state === 'Done' && n.status!.currentConfig === p.status!.configuration;
    }, 10_000, 'worker-0 Done on the worker config');
    const dryRun = async (kind: string, mirror: Record<string, unknown>) => (await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'mirrors.yaml', text: stringify({ apiVersion: 'config.openshift.io/v1', kind, metadata: { name: 'preview' }, spec: { [kind === 'ImageTagMirrorSet' ? 'imageTagMirrors' : 'imageDigestMirrors']: [mirror] } }) }], dryRun: true }, 'apply')).nodePreviews.find((n) => n.node === 'worker-0')!;
    const digest = await dryRun('ImageDigestMirrorSet', { source: 'quay.io/app', mirrors: ['mirror.io/app'] });
    assert.equal(digest.action, 'reload');
    assert.match(digest.why, /file \/etc\/containers\/registries\.conf changed: built-in policy \(MCO's Special\) files \/etc\/containers\/registries\.conf: .*: reload crio, no drain/);
    // MCO checks only the mirrors of a new registry: NeverContactSource (blocked) on one is still safe.
    assert.equal((await dryRun('ImageDigestMirrorSet', { source: 'quay.io/app', mirrors: ['mirror.io/app'], mirrorSourcePolicy: 'NeverContactSource' })).action, 'reload');
    // Tag-only mirrors are never safe.
    const tag = await dryRun('ImageTagMirrorSet', { source: 'quay.io/app', mirrors: ['mirror.io/app'] });
    assert.equal(tag.action, 'drain');
    assert.match(tag.why, /registry quay\.io\/app has been added with a mirror that is not pull-from-mirror=digest-only: reload crio, drain/);
    assert.ok(!(await mcNames()).includes('99-worker-generated-registries'), 'a dry run stores nothing');
  } finally {
    agent.close();
  }
});
