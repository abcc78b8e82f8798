// KubeletConfiguration read and written as Go's encoding/json does it in MCO's
// DecodeKubeletConfig and EncodeKubeletConfig: types refused, keys folded, unknown keys dropped,
// durations in Go's form, zero values written where Go writes them.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeKubeletConfiguration, encodeKubeletConfiguration } from '../../src/machineconfig/kubelet-configuration.ts';
import { ProblemCollector } from '../../src/machineconfig/problem-collector.ts';

function decode(raw: Record<string, unknown>) {
  const c = new ProblemCollector('KubeletConfig/k');
  const decoded = decodeKubeletConfiguration(raw, c, 'spec.kubeletConfig');
  return { ...decoded, c };
}

test('a value of the wrong type is refused, naming the field, the type it needs and what it got', () => {
  const { c } = decode({
    maxPods: '250', evictionHard: { 'memory.available': 100 }, serializeImagePulls: 'false', podPidsLimit: 1.5, port: 2 ** 31,
    imageMinimumGCAge: '5 minutes', authentication: { anonymous: { enabled: 'no' } }, tlsCipherSuites: 'TLS_AES_128_GCM_SHA256',
    registerWithTaints: [{ key: 'k', effect: 'NoSchedule', timeAdded: 'yesterday' }],
  });
  assert.deepEqual(c.problems.map((p) => [p.field, p.rule]), [
    ['spec.kubeletConfig.maxPods', 'kubelet-config-type'],
    ['spec.kubeletConfig.evictionHard.memory.available', 'kubelet-config-type'],
    ['spec.kubeletConfig.serializeImagePulls', 'kubelet-config-type'],
    ['spec.kubeletConfig.podPidsLimit', 'kubelet-config-type'],
    ['spec.kubeletConfig.port', 'kubelet-config-type'],
    ['spec.kubeletConfig.imageMinimumGCAge', 'kubelet-config-type'],
    ['spec.kubeletConfig.authentication.anonymous.enabled', 'kubelet-config-type'],
    ['spec.kubeletConfig.tlsCipherSuites', 'kubelet-config-type'],
    ['spec.kubeletConfig.registerWithTaints[0].timeAdded', 'kubelet-config-type'],
  ]);
  assert.equal(c.problems[0]!.message, 'KubeletConfig could not be unmarshalled: maxPods must be int32, got string "250" (MCO refuses it too, and keeps the pool\'s kubelet.conf as it was)');
  assert.match(c.problems[1]!.message, /evictionHard\.memory\.available must be string, got number 100/);
  assert.match(c.problems[4]!.message, /port must be int32, got 2147483648, which does not fit/);
  assert.match(c.problems[5]!.message, /imageMinimumGCAge must be a duration string such as "5m0s", got "5 minutes" \(time: unknown unit " minutes" in duration "5 minutes"\)/);
});

test('keys fold to their field as Go matches them, unknown keys are dropped and named, nulls leave a field unset', () => {
  const { value, ignored, c } = decode({ MaxPods: 300, EVICTIONHARD: { 'memory.available': '5%' }, maxPod: 12, authentication: { X509: { clientCAFILE: '/ca' }, bogus: true }, tracing: null, logging: { flushFrequency: '5s', Verbosity: 2 } });
  assert.equal(c.ok, true, JSON.stringify(c.problems));
  assert.deepEqual(value, { maxPods: 300, evictionHard: { 'memory.available': '5%' }, authentication: { x509: { clientCAFile: '/ca' } }, logging: { flushFrequency: '5s', verbosity: 2 } });
  assert.deepEqual(ignored, ['maxPod', 'authentication.bogus']);
  // An exact match wins over a folded one; for a map both keys fill the one map, in order.
  assert.deepEqual(decode({ maxPods: 1, MAXPODS: 2 }).value, { maxPods: 2 });
  assert.deepEqual(decode({ evictionHard: { a: '1' }, EvictionHard: { b: '2' } }).value, { evictionHard: { a: '1', b: '2' } });
});

test('durations, times and quantities are written as Go writes them', () => {
  const { value, c } = decode({
    imageMinimumGCAge: '5m', shutdownGracePeriod: '1h', cpuCFSQuotaPeriod: '100000us', nodeStatusUpdateFrequency: '10s',
    logging: { flushFrequency: 5000000000 }, reservedMemory: [{ numaNode: 0, limits: { memory: '1024Mi' } }],
    registerWithTaints: [{ key: 'k', effect: 'NoSchedule', timeAdded: '2026-11-28T10:00:00.5+01:00' }],
  });
  assert.equal(c.ok, true, JSON.stringify(c.problems));
  assert.equal(value.imageMinimumGCAge, '5m0s');
  assert.equal(value.shutdownGracePeriod, '1h0m0s');
  assert.equal(value.cpuCFSQuotaPeriod, '100ms');
  assert.equal(value.nodeStatusUpdateFrequency, '10s');
  assert.deepEqual(value.logging, { flushFrequency: 5000000000 }, 'a number of nanoseconds stays a number (TimeOrMetaDuration)');
  assert.deepEqual(value.reservedMemory, [{ numaNode: 0, limits: { memory: '1Gi' } }]);
  assert.deepEqual(value.registerWithTaints, [{ key: 'k', effect: 'NoSchedule', timeAdded: '2026-11-28T09:00:00Z' }]);
});

test('encoding writes what Go writes: zero values of fields without omitempty and of structs, no empty omitempty field, no unset pointer', () => {
  const out = encodeKubeletConfiguration({ apiVersion: 'kubelet.config.k8s.io/v1beta1', kind: 'KubeletConfiguration', maxPods: 250, runOnce: false, podPidsLimit: 0, evictionHard: {}, tlsCipherSuites: [] });
  assert.equal(out.maxPods, 250);
  assert.equal('runOnce' in out, false, 'false with omitempty');
  assert.equal(out.podPidsLimit, 0, 'a set pointer is written, zero or not');
  assert.equal('evictionHard' in out || 'tlsCipherSuites' in out, false, 'empty map and slice with omitempty');
  assert.equal('enableServer' in out, false, 'an unset pointer');
  assert.equal(out.syncFrequency, '0s', 'a metav1.Duration is a struct: omitempty never leaves it out');
  assert.equal(out.containerRuntimeEndpoint, '', 'no omitempty');
  assert.deepEqual(out.memorySwap, {});
  assert.deepEqual(out.crashLoopBackOff, {});
  assert.deepEqual(out.authentication, { x509: {}, webhook: { cacheTTL: '0s' }, anonymous: {} });
  assert.deepEqual(out.authorization, { webhook: { cacheAuthorizedTTL: '0s', cacheUnauthorizedTTL: '0s' } });
  assert.deepEqual(out.logging, { flushFrequency: 0, verbosity: 0, options: { text: { infoBufferSize: '0' }, json: { infoBufferSize: '0' } } });
});

test('nulls as Go reads them: a map or list element is its zero value, a metav1.Duration refuses it, a pointer stays unset', () => {
  const { value, c } = decode({ evictionHard: { 'memory.available': null }, tlsCipherSuites: ['TLS_AES_128_GCM_SHA256', null], cpuCFSQuotaPeriod: null });
  assert.equal(c.ok, true, JSON.stringify(c.problems));
  assert.deepEqual(value, { evictionHard: { 'memory.available': '' }, tlsCipherSuites: ['TLS_AES_128_GCM_SHA256', ''] });
  const refused = decode({ syncFrequency: null });
  assert.deepEqual(refused.c.problems.map((p) => p.field), ['spec.kubeletConfig.syncFrequency']);
  assert.match(refused.c.problems[0]!.message, /time: invalid duration ""/);
});

test('a struct given twice (two keys that fold to it) is one struct, as Go decodes both into it', () => {
  const { value } = decode({ authentication: { x509: { clientCAFile: '/ca' } }, Authentication: { webhook: { enabled: true }, X509: {} } });
  assert.deepEqual(value.authentication, { x509: { clientCAFile: '/ca' }, webhook: { enabled: true } });
});

test('quantities: what Go\'s Quantity writes back (canonical, or the input where its fast path keeps it)', () => {
  const { value, c } = decode({ reservedMemory: [{ numaNode: 0, limits: { memory: '1024Mi', a: '1.5G', b: '500m', d: '1e3', e: 1073741824, f: '1.15Gi', g: '1e14', h: '+1Gi', i: 1.5 } }] });
  assert.equal(c.ok, true, JSON.stringify(c.problems));
  assert.deepEqual((value.reservedMemory as { limits: unknown }[])[0]!.limits, { memory: '1Gi', a: '1500M', b: '500m', d: '1e3', e: '1073741824', f: '1234803097600m', g: '100e12', h: '+1Gi', i: '1500m' });
  assert.deepEqual(decode({ reservedMemory: [{ numaNode: 0, limits: { memory: 'lots' } }] }).c.problems.map((p) => p.rule), ['kubelet-config-type']);
});
