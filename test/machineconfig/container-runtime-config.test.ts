// ContainerRuntimeConfig validation and generation, following machine-config-operator 7ff337a4
// pkg/controller/container-runtime-config/helpers.go (validateUserContainerRuntimeConfig,
// createCRIODropinFiles, updateStorageConfig) and helpers_test.go (TestCreateCRIODropinFiles'
// exact drop-in text, TestUpdateStorageConfig, TestUpdateStorageConfigAdditionalStores,
// TestCreateCRIODropinFilesAdditionalArtifactStores: the AdditionalStorageConfig gate, which the
// vendored openshift/api features/features.go enables in the Default feature set).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateContainerRuntimeFiles, parseContainerRuntimeConfig, updateStorageConfig } from '../../src/machineconfig/container-runtime-config.ts';
import { parseQuantity, type Quantity } from '../../src/machineconfig/quantity.ts';
import { ProblemCollector } from '../../src/machineconfig/problem-collector.ts';
import { parseToml } from '../../src/machineconfig/toml.ts';

function parse(ctr: Record<string, unknown>) {
  const c = new ProblemCollector('ContainerRuntimeConfig/x');
  const cfg = parseContainerRuntimeConfig({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'ContainerRuntimeConfig', metadata: { name: 'set-pids' }, spec: { machineConfigPoolSelector: { matchLabels: { a: 'b' } }, containerRuntimeConfig: ctr } }, c);
  return { cfg, c };
}

test('validateUserContainerRuntimeConfig: pidsLimit under 20 (not 0), logSizeMax up to 8k, negative overlaySize, unknown logLevel and runtime, store paths', () => {
  const { c } = parse({ pidsLimit: 19, logSizeMax: '8k', overlaySize: '-1G', logLevel: 'verbose', defaultRuntime: 'kata', additionalLayerStores: [{ path: 'relative' }, { path: '/a//b' }] });
  assert.deepEqual(c.problems.map((p) => p.rule), ['pids-limit', 'log-size-max', 'overlay-size', 'crio-log-level', 'default-runtime', 'store-path', 'store-path']);
  assert.equal(c.problems[0]!.field, 'spec.containerRuntimeConfig.pidsLimit');
  for (const ok of [{ pidsLimit: 0 }, { pidsLimit: 20 }, { logSizeMax: '-1' }, { logSizeMax: '9k' }, { logLevel: 'debug', defaultRuntime: 'crun' }]) assert.equal(parse(ok).c.ok, true, JSON.stringify(ok));
});

test('TestCreateCRIODropinFiles: one drop-in per field, [crio.runtime] as BurntSushi encodes it; a zero logSizeMax writes none', () => {
  const { cfg } = parse({ logLevel: 'debug', pidsLimit: 2048, logSizeMax: '10G', defaultRuntime: 'crun' });
  assert.deepEqual(generateContainerRuntimeFiles(cfg!, undefined), [
    { path: '/etc/crio/crio.conf.d/01-ctrcfg-logLevel', contents: '[crio]\n  [crio.runtime]\n    log_level = "debug"\n' },
    { path: '/etc/crio/crio.conf.d/01-ctrcfg-pidsLimit', contents: '[crio]\n  [crio.runtime]\n    pids_limit = 2048\n' },
    { path: '/etc/crio/crio.conf.d/01-ctrcfg-logSizeMax', contents: '[crio]\n  [crio.runtime]\n    log_size_max = 10000000000\n' },
    { path: '/etc/crio/crio.conf.d/01-ctrcfg-defaultRuntime', contents: '[crio]\n  [crio.runtime]\n    default_runtime = "crun"\n' },
  ]);
  assert.deepEqual(generateContainerRuntimeFiles(parse({ logSizeMax: '0k' }).cfg!, undefined), []);
});

test('TestUpdateStorageConfig: overlaySize sets storage.options.size in the pool\'s storage.conf; other options kept', () => {
  const base = '[storage]\ndriver = "overlay"\nrunroot = "/run/containers/storage"\ngraphroot = "/var/lib/containers/storage"\n[storage.options]\nadditionalimagestores = [\n]\n[storage.options.overlay]\nmountopt = "nodev,metacopy=on"\n# a comment\n';
  const files = generateContainerRuntimeFiles(parse({ overlaySize: '10G' }).cfg!, base);
  assert.equal(files[0]!.path, '/etc/containers/storage.conf');
  assert.deepEqual(parseToml(files[0]!.contents), { storage: { driver: 'overlay', runroot: '/run/containers/storage', graphroot: '/var/lib/containers/storage', options: { size: '10G', overlay: { mountopt: 'nodev,metacopy=on' } } } });
  assert.throws(() => generateContainerRuntimeFiles(parse({ overlaySize: '10G' }).cfg!, undefined), /storage\.conf/);
});

test('TestUpdateStorageConfigAdditionalStores: layer stores get :ref (never twice), image stores as given, with overlaySize; the base\'s lists replaced', () => {
  const base = '[storage]\ndriver = "overlay"\n[storage.options]\nadditionalimagestores = ["/old"]\n';
  const options = (changes: Parameters<typeof updateStorageConfig>[1]) => (parseToml(updateStorageConfig(base, changes)) as { storage: { options: unknown } }).storage.options;
  assert.deepEqual(options({ additionalLayerStores: [{ path: '/var/lib/stargz-store' }, { path: '/mnt/nfs-layers' }] }), { additionalimagestores: ['/old'], additionallayerstores: ['/var/lib/stargz-store:ref', '/mnt/nfs-layers:ref'] });
  assert.deepEqual(options({ additionalImageStores: [{ path: '/mnt/nfs-images' }, { path: '/mnt/ssd-images' }] }), { additionalimagestores: ['/mnt/nfs-images', '/mnt/ssd-images'] });
  assert.deepEqual(options({ overlaySize: parseQuantity('10G') as Quantity, additionalLayerStores: [{ path: '/var/lib/stargz-store' }], additionalImageStores: [{ path: '/mnt/nfs-images' }] }), { additionalimagestores: ['/mnt/nfs-images'], additionallayerstores: ['/var/lib/stargz-store:ref'], size: '10G' });
  assert.deepEqual(options({ additionalLayerStores: [{ path: '/var/lib/stargz-store/store:ref' }] }), { additionalimagestores: ['/old'], additionallayerstores: ['/var/lib/stargz-store/store:ref'] });

  // Through the generator: stores alone ask for storage.conf (needsStorageUpdate), and the
  // artifact stores get their own drop-in after the others (createCRIODropinFiles).
  const { cfg, c } = parse({ pidsLimit: 2048, additionalLayerStores: [{ path: '/var/lib/stargz-store' }], additionalArtifactStores: [{ path: '/mnt/ssd-artifacts' }, { path: '/mnt/nfs-artifacts' }] });
  assert.deepEqual(c.problems, []);
  const files = generateContainerRuntimeFiles(cfg!, base);
  assert.deepEqual(files.map((f) => f.path), ['/etc/containers/storage.conf', '/etc/crio/crio.conf.d/01-ctrcfg-pidsLimit', '/etc/crio/crio.conf.d/01-ctrcfg-additionalArtifactStores']);
  assert.equal(files[2]!.contents, '[crio]\n  [crio.runtime]\n    additional_artifact_stores = ["/mnt/ssd-artifacts", "/mnt/nfs-artifacts"]\n');
  assert.throws(() => generateContainerRuntimeFiles(parse({ additionalImageStores: [{ path: '/mnt/images' }] }).cfg!, undefined), (e: { problems: { field: string; rule: string }[] }) => e.problems[0]!.field === 'spec.containerRuntimeConfig.additionalImageStores' && e.problems[0]!.rule === 'base-config-missing');
  // Artifact stores alone need no storage.conf.
  assert.deepEqual(generateContainerRuntimeFiles(parse({ additionalArtifactStores: [{ path: '/mnt/a' }] }).cfg!, undefined).map((f) => f.path), ['/etc/crio/crio.conf.d/01-ctrcfg-additionalArtifactStores']);
});

test('the store lists\' CRD bounds: 1 to 5 layer stores, 1 to 10 image and artifact stores, no duplicate paths, only path', () => {
  const { c } = parse({ additionalLayerStores: Array.from({ length: 6 }, (_, i) => ({ path: `/l${i}` })), additionalImageStores: [], additionalArtifactStores: [{ path: '/a' }, { path: '/a', readOnly: true }] });
  assert.deepEqual(c.problems.map((p) => `${p.field} ${p.rule}`), [
    'spec.containerRuntimeConfig.additionalLayerStores store-count',
    'spec.containerRuntimeConfig.additionalImageStores store-count',
    'spec.containerRuntimeConfig.additionalArtifactStores[1].path store-duplicate',
    'spec.containerRuntimeConfig.additionalArtifactStores[1].readOnly unknown-field',
  ]);
});

test('quantities are written as Go writes them: overlaySize as String(), logSizeMax as Value(); a bad one names Go\'s reason', () => {
  const base = '[storage]\ndriver = "overlay"\n[storage.options]\n';
  const { cfg, c } = parse({ overlaySize: '1.15Gi', logSizeMax: '10.5Ki' });
  assert.deepEqual(c.problems, []);
  const files = generateContainerRuntimeFiles(cfg!, base);
  // 1.15Gi is no whole number of bytes: Go writes it exactly, in milli (test/fixtures/go-quantity).
  assert.match(files[0]!.contents, /^\s*size = "1234803097600m"$/m);
  assert.match(files.find((f) => f.path.endsWith('logSizeMax'))!.contents, /^\s*log_size_max = 10752$/m);
  // needsStorageUpdate asks IsZero(), the size line Value(): past int64, "12E" has a Value() of 0,
  // so storage.conf is written again without a size, as MCO writes it.
  const past = generateContainerRuntimeFiles(parse({ overlaySize: '12E' }).cfg!, base);
  assert.deepEqual(past.map((f) => f.path), ['/etc/containers/storage.conf']);
  assert.doesNotMatch(past[0]!.contents, /size/);
  const bad = parse({ overlaySize: '1i' }).c.problems;
  assert.deepEqual(bad.map((p) => `${p.field} ${p.rule} ${p.message}`), ['spec.containerRuntimeConfig.overlaySize quantity "1i" is not a quantity such as 10G or 512Mi (unable to parse quantity\'s suffix)']);
});
