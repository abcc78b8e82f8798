// ContainerRuntimeConfig validation and generation, following machine-config-operator 7ff337a4
// pkg/controller/container-runtime-config/helpers.go (validateUserContainerRuntimeConfig,
// createCRIODropinFiles, updateStorageConfig) and helpers_test.go (TestCreateCRIODropinFiles'
// exact drop-in text, TestUpdateStorageConfig).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateContainerRuntimeFiles, parseContainerRuntimeConfig, parseQuantity } from '../../src/machineconfig/container-runtime-config.ts';
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

test('resource.Quantity: bytes rounded up and the canonical text', () => {
  assert.deepEqual(parseQuantity('10G'), { value: 10_000_000_000, text: '10G' });
  assert.deepEqual(parseQuantity('1024Mi'), { value: 2 ** 30, text: '1Gi' });
  assert.deepEqual(parseQuantity('1.5G'), { value: 1_500_000_000, text: '1500M' });
  assert.equal(parseQuantity('ten'), undefined);
});
