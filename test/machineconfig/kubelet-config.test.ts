// KubeletConfig validation and generation, following machine-config-operator 7ff337a4
// pkg/controller/kubelet-config/helpers.go (validateUserKubeletConfig, generateKubeletIgnFiles,
// validateStaticPodPathGivenPool, getManagedKubeletConfigKey) and its helpers_test.go /
// kubelet_config_controller_test.go expectations (refused fields, the logging drop-in text, the
// node-sizing env text, the -N suffixes).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { GenerateConfigError } from '../../src/machineconfig/errors.ts';
import { generateKubeletFiles, managedKey, parseKubeletConfig, type KubeletConfig } from '../../src/machineconfig/kubelet-config.ts';
import { ProblemCollector } from '../../src/machineconfig/problem-collector.ts';
import { defaultPools } from '../../src/machineconfig/index.ts';
import type { MachineConfigPool } from '../../src/machineconfig/types.ts';

const doc = (spec: Record<string, unknown>, name = 'set-max-pods') => ({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'KubeletConfig', metadata: { name }, spec: { machineConfigPoolSelector: { matchLabels: { 'pools.operator.machineconfiguration.openshift.io/worker': '' } }, ...spec } });
function parse(spec: Record<string, unknown>, name?: string): { kc?: KubeletConfig; c: ProblemCollector } {
  const c = new ProblemCollector('KubeletConfig/x');
  const kc = parseKubeletConfig(doc(spec, name), c);
  return { ...(kc ? { kc } : {}), c };
}
const pools = defaultPools();
const worker = { ...pools.find((p) => p.metadata.name === 'worker')!, metadata: { name: 'worker', labels: { 'pools.operator.machineconfiguration.openshift.io/worker': '' } } } as MachineConfigPool;
const master = pools.find((p) => p.metadata.name === 'master')!;

const BASE = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  x509:
    clientCAFile: /etc/kubernetes/kubelet-ca.crt
cgroupDriver: systemd
clusterDNS:
  - 172.30.0.10
maxPods: 250
serializeImagePulls: false
protectKernelDefaults: true
systemReserved:
  ephemeral-storage: 1Gi
evictionHard:
  memory.available: 100Mi
enforceNodeAllocatable:
  - pods
systemReservedCgroup: /system.slice
featureGates:
  RotateKubeletServerCertificate: true
`;

test('validateUserKubeletConfig: the fields MCO owns are refused, each naming object, field and rule', () => {
  const { c } = parse({ kubeletConfig: { cgroupDriver: 'cgroupfs', clusterDNS: ['1.1.1.1'], clusterDomain: 'x.local', featureGates: { A: true }, failSwapOn: false, memorySwap: { swapBehavior: 'LimitedSwap' } }, logLevel: 11 });
  assert.deepEqual(c.problems.map((p) => [p.field, p.rule]), [
    ['spec.logLevel', 'log-level-range'],
    ['spec.kubeletConfig.cgroupDriver', 'kubelet-field-refused'],
    ['spec.kubeletConfig.clusterDNS', 'kubelet-field-refused'],
    ['spec.kubeletConfig.clusterDomain', 'kubelet-field-refused'],
    ['spec.kubeletConfig.featureGates', 'kubelet-field-refused'],
    ['spec.kubeletConfig.failSwapOn', 'kubelet-field-refused'],
    ['spec.kubeletConfig.memorySwap.swapBehavior', 'kubelet-field-refused'],
  ]);
  assert.match(c.problems[1]!.message, /cgroupDriver is not allowed to be set, but contains: "cgroupfs"/);
  assert.equal(parse({ logLevel: 10, kubeletConfig: { maxPods: 500 } }).c.ok, true);
  assert.equal(parse({ autoSizingReserved: true, kubeletConfig: { systemReserved: { memory: '2Gi' } } }).c.problems[0]!.rule, 'auto-sizing-and-system-reserved');
});

test('generateKubeletIgnFiles: the whole kubelet.conf, the base with the spec merged over it (mergo WithOverride)', () => {
  const { kc } = parse({ kubeletConfig: { maxPods: 500, serializeImagePulls: true, protectKernelDefaults: false, evictionHard: { 'nodefs.available': '10%' }, authentication: { anonymous: { enabled: true } }, podPidsLimit: 0, runOnce: false, systemReserved: { memory: '3Gi', 'ephemeral-storage': '2Gi' } } });
  const files = generateKubeletFiles(kc!, worker, BASE);
  assert.deepEqual(files.map((f) => f.path), ['/etc/node-sizing-enabled.env', '/etc/kubernetes/kubelet.conf']);
  // systemReserved's memory/cpu/ephemeral-storage go to the node-sizing env file, not kubelet.conf.
  assert.equal(files[0]!.contents, 'NODE_SIZING_ENABLED=false\nSYSTEM_RESERVED_MEMORY=3Gi\nSYSTEM_RESERVED_CPU=500m\nSYSTEM_RESERVED_ES=2Gi\n');
  const conf = parseYaml(files[1]!.contents);
  assert.equal(conf.maxPods, 500);
  assert.equal(conf.serializeImagePulls, true);
  // The raw spec's `"protectKernelDefaults":false` overrides the base's true; then, a plain bool
  // with omitempty, Go's encoder leaves it out (the kubelet's default is false).
  assert.equal('protectKernelDefaults' in conf, false, 'protectKernelDefaults: false is found in the raw spec, and written as Go writes a false omitempty bool');
  assert.deepEqual(conf.evictionHard, { 'memory.available': '100Mi', 'nodefs.available': '10%' }, 'maps merge key by key');
  // A struct without omitempty is written whole, zero fields too (webhook's cacheTTL: 0s).
  assert.deepEqual(conf.authentication, { anonymous: { enabled: true }, webhook: { cacheTTL: '0s' }, x509: { clientCAFile: '/etc/kubernetes/kubelet-ca.crt' } });
  assert.equal(conf.podPidsLimit, 0, 'a pointer field the base lacks takes the spec\'s zero');
  assert.equal('runOnce' in conf, false, 'a plain bool false is a zero value: left out');
  assert.deepEqual(conf.systemReserved, { 'ephemeral-storage': '1Gi' });
  assert.deepEqual(conf.featureGates, { RotateKubeletServerCertificate: true }, 'feature gates stay the base\'s');
  // sigs.k8s.io/yaml sorts keys, sequences unindented.
  const keys = files[1]!.contents.split('\n').filter((l) => /^[a-zA-Z]/.test(l)).map((l) => l.split(':')[0]!);
  assert.deepEqual(keys, [...keys].sort());
  assert.match(files[1]!.contents, /^enforceNodeAllocatable:\n- pods$/m);
});

test('a zero in the spec never overrides a set value (mergo skips empty source values)', () => {
  const { kc } = parse({ kubeletConfig: { maxPods: 0, serializeImagePulls: false, systemReservedCgroup: '' } });
  const conf = parseYaml(generateKubeletFiles(kc!, worker, BASE.replace('serializeImagePulls: false', 'serializeImagePulls: true')).at(-1)!.contents);
  assert.equal(conf.maxPods, 250);
  assert.equal(conf.serializeImagePulls, true);
  assert.equal(conf.systemReservedCgroup, '/system.slice');
});

test('logLevel adds the 20-logging.conf drop-in; autoSizingReserved the node-sizing file; MCO\'s order', () => {
  const { kc } = parse({ logLevel: 4, autoSizingReserved: true });
  const files = generateKubeletFiles(kc!, worker, BASE);
  assert.deepEqual(files.map((f) => f.path), ['/etc/node-sizing-enabled.env', '/etc/systemd/system/kubelet.service.d/20-logging.conf', '/etc/kubernetes/kubelet.conf']);
  assert.equal(files[0]!.contents, 'NODE_SIZING_ENABLED=true\nSYSTEM_RESERVED_MEMORY=1Gi\nSYSTEM_RESERVED_CPU=500m\nSYSTEM_RESERVED_ES=1Gi\n');
  assert.equal(files[1]!.contents, '[Service]\nEnvironment="KUBELET_LOG_LEVEL=4"\n');
});

test('reservedSystemCPUs drops the system-reserved cgroup and keeps pods enforcement first', () => {
  const { kc } = parse({ kubeletConfig: { reservedSystemCPUs: '0-1', enforceNodeAllocatable: ['system-reserved', 'kube-reserved'] } });
  const conf = parseYaml(generateKubeletFiles(kc!, worker, BASE).at(-1)!.contents);
  assert.equal(conf.systemReservedCgroup, undefined);
  assert.deepEqual(conf.enforceNodeAllocatable, ['pods', 'kube-reserved']);
});

test('staticPodPath: refused on control-plane pools, only "" elsewhere; no base kubelet.conf is a clear error', () => {
  const { kc } = parse({ kubeletConfig: { staticPodPath: '' } });
  assert.throws(() => generateKubeletFiles(kc!, master, BASE), (e: unknown) => e instanceof GenerateConfigError && e.problems[0]!.rule === 'static-pod-path');
  assert.doesNotThrow(() => generateKubeletFiles(kc!, worker, BASE));
  assert.throws(() => generateKubeletFiles(kc!, worker, undefined), (e: unknown) => e instanceof GenerateConfigError && e.problems[0]!.rule === 'base-config-missing' && /01-worker-kubelet/.test(e.message));
});

// kubelet_config_controller.go syncKubeletConfig: a KubeletConfig's tlsSecurityProfile replaces the
// template's (APIServer's) tlsMinVersion and tlsCipherSuites before generateKubeletIgnFiles merges
// kubeletConfig over it; kubelet_config_controller_test.go TestKubeletConfigTLSOverride.
const TLS_BASE = `${BASE}tlsMinVersion: VersionTLS10\ntlsCipherSuites:\n  - TLS_RSA_WITH_AES_128_CBC_SHA\n`;
const tlsOf = (spec: Record<string, unknown>) => {
  const { kc, c } = parse(spec);
  assert.deepEqual(c.problems, []);
  const conf = parseYaml(generateKubeletFiles(kc!, worker, TLS_BASE).at(-1)!.contents);
  return { tlsMinVersion: conf.tlsMinVersion, tlsCipherSuites: conf.tlsCipherSuites, maxPods: conf.maxPods };
};
const TLS13 = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];
const INTERMEDIATE = [...TLS13, 'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384', 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384', 'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256', 'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256'];

test('tlsSecurityProfile sets kubelet.conf\'s tlsMinVersion and tlsCipherSuites (IANA names) for each profile type', () => {
  assert.deepEqual(tlsOf({ tlsSecurityProfile: { type: 'Modern', modern: {} } }), { tlsMinVersion: 'VersionTLS13', tlsCipherSuites: TLS13, maxPods: 250 });
  assert.deepEqual(tlsOf({ tlsSecurityProfile: { type: 'Intermediate' } }), { tlsMinVersion: 'VersionTLS12', tlsCipherSuites: INTERMEDIATE, maxPods: 250 });
  const old = tlsOf({ tlsSecurityProfile: { type: 'Old', old: {} } });
  assert.equal(old.tlsMinVersion, 'VersionTLS10');
  assert.equal(old.tlsCipherSuites.length, 21, 'Old\'s 24 ciphers less the 3 Go cannot negotiate');
  assert.equal(old.tlsCipherSuites.at(-1), 'TLS_RSA_WITH_3DES_EDE_CBC_SHA');
  assert.deepEqual(tlsOf({ tlsSecurityProfile: { type: 'Custom', custom: { minTLSVersion: 'VersionTLS11', ciphers: ['ECDHE-RSA-CHACHA20-POLY1305', 'ECDHE-RSA-AES256-SHA384', 'ECDHE-ECDSA-AES128-GCM-SHA256'] } } }), { tlsMinVersion: 'VersionTLS11', tlsCipherSuites: ['TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256', 'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256'], maxPods: 250 });
  // No type, or Custom without a custom block: GetSecurityProfileCiphers falls back to Intermediate.
  assert.deepEqual(tlsOf({ tlsSecurityProfile: {} }).tlsCipherSuites, INTERMEDIATE);
  assert.deepEqual(tlsOf({ tlsSecurityProfile: { type: 'Custom', custom: null } }).tlsMinVersion, 'VersionTLS12');
  // A Custom profile without ciphers or version: both fields are omitempty, so they leave kubelet.conf.
  assert.deepEqual(tlsOf({ tlsSecurityProfile: { type: 'Custom', custom: {} } }), { tlsMinVersion: undefined, tlsCipherSuites: undefined, maxPods: 250 });
  // No profile: the base's values (the cluster's APIServer profile, as its MCO rendered them) stay.
  assert.deepEqual(tlsOf({ kubeletConfig: { maxPods: 300 } }), { tlsMinVersion: 'VersionTLS10', tlsCipherSuites: ['TLS_RSA_WITH_AES_128_CBC_SHA'], maxPods: 300 });
  // kubeletConfig's own fields are merged after the profile, so they win.
  assert.deepEqual(tlsOf({ tlsSecurityProfile: { type: 'Old' }, kubeletConfig: { tlsMinVersion: 'VersionTLS12', tlsCipherSuites: INTERMEDIATE } }), { tlsMinVersion: 'VersionTLS12', tlsCipherSuites: INTERMEDIATE, maxPods: 250 });
  assert.equal(tlsOf({ tlsSecurityProfile: { type: 'Modern' }, kubeletConfig: { tlsMinVersion: '' } }).tlsMinVersion, 'VersionTLS13', 'an empty string never overrides');
});

test('tlsSecurityProfile refusals (the CRD schema\'s) name object, field and rule', () => {
  const { kc, c } = parse({ tlsSecurityProfile: { type: 'Strict', custom: { minTLSVersion: 'TLS1.2', ciphers: 'ECDHE-RSA-AES128-GCM-SHA256' } } });
  assert.equal(kc, undefined);
  assert.deepEqual(c.problems.map((p) => `${p.object} ${p.field} ${p.rule}`), [
    'KubeletConfig/x spec.tlsSecurityProfile.type tls-profile-type',
    'KubeletConfig/x spec.tlsSecurityProfile.custom.ciphers type',
    'KubeletConfig/x spec.tlsSecurityProfile.custom.minTLSVersion tls-min-version',
  ]);
  assert.match(c.problems[0]!.message, /type must be one of Old, Intermediate, Modern, Custom, got "Strict"/);
});

test('getManagedKubeletConfigKey: the first config for a pool has no suffix, later ones -N; the annotation wins; ten at most', () => {
  const sel = { matchLabels: { 'pools.operator.machineconfiguration.openshift.io/worker': '' } };
  const a = { name: 'a', selector: sel };
  const b = { name: 'b', selector: sel };
  assert.equal(managedKey(worker, 'kubelet', a, [a], new Map()), '99-worker-generated-kubelet');
  const owned = new Map([['a', '99-worker-generated-kubelet']]);
  assert.equal(managedKey(worker, 'kubelet', a, [a, b], owned), '99-worker-generated-kubelet', 'a keeps the name it holds');
  assert.equal(managedKey(worker, 'kubelet', b, [a, b], owned), '99-worker-generated-kubelet-1');
  const c = { name: 'c', selector: sel, annotations: { 'machineconfiguration.openshift.io/mc-name-suffix': '7' } };
  assert.equal(managedKey(worker, 'kubelet', c, [a, b, c], owned), '99-worker-generated-kubelet-7');
  const d = { name: 'd', selector: sel };
  assert.equal(managedKey(worker, 'kubelet', d, [a, b, c, d], owned), '99-worker-generated-kubelet-8');
  const full = { name: 'e', selector: sel, annotations: { 'machineconfiguration.openshift.io/mc-name-suffix': '9' } };
  assert.throws(() => managedKey(worker, 'kubelet', d, [a, full, d], owned), (e: unknown) => e instanceof GenerateConfigError && e.problems[0]!.rule === 'max-configs-per-pool');
});

test('the pool\'s kubelet.conf is read as YAML 1.1, as sigs.k8s.io/yaml reads it (yes is true)', () => {
  const { kc } = parse({ kubeletConfig: { maxPods: 300 } });
  const conf = parseYaml(generateKubeletFiles(kc!, worker, `${BASE}rotateCertificates: yes\n`).at(-1)!.contents);
  assert.equal(conf.rotateCertificates, true);
});
