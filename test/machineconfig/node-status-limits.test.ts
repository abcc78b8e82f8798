import assert from 'node:assert/strict';
import { test } from 'node:test';
import { boundNodeStatus, type NodeStatus } from '../../src/machineconfig/index.ts';

const base: NodeStatus = {
  currentConfig: 'rendered-worker-1', desiredConfig: 'rendered-worker-2', state: 'Working', phase: 'apply', reason: 'writing files',
  drift: [{ path: '/etc/a', kind: 'file', expectedHash: 'e', actualHash: 'a', detectedUnixMs: 5 }],
  os: { bootedImage: 'img', bootedChecksum: 'sum', kernelArguments: ['a=1'], kernelType: 'default', extensions: ['usbguard'], stagedImage: '', fips: false },
  bootId: 'b', agentVersion: '1', lastDisruption: '',
};

test('a status within the limits is returned unchanged', () => {
  assert.deepEqual(boundNodeStatus(base), base);
});

test('every field is cut, and a cut never splits a surrogate pair', () => {
  // One of the two prefixes puts a pair across the cut, whichever way the marker's length falls.
  for (const prefix of ['a', 'aa']) {
    const reason = prefix + '😀'.repeat(5000);
    const out = boundNodeStatus({ ...base, reason });
    assert.ok(out.reason.length <= 4096);
    assert.doesNotMatch(out.reason, /\p{Cs}/u);
    assert.match(out.reason, /^a+(😀)+ … \[cut: \d+ more characters\]$/);
    const kept = out.reason.indexOf(' …');
    assert.equal(kept + Number(/cut: (\d+)/.exec(out.reason)![1]), reason.length);
  }
  const out = boundNodeStatus({ ...base, state: 'X'.repeat(5000) as NodeStatus['state'], os: { ...base.os!, extensions: Array.from({ length: 300 }, (_, i) => `e${i}`) } });
  assert.ok(out.state.length <= 1024);
  assert.equal(out.os!.extensions.length, 257);
  assert.equal(out.os!.extensions.at(-1), '… and 44 more');
});

test('staging and PinnedImageSet reports: kept as sent within the limits; a state outside the protocol, a bad count and a long reason are not', () => {
  const staging = { config: 'rendered-worker-2', state: 'Staging' as const, bytesDone: 10, bytesTotal: 100, reason: '', startedUnixMs: 1, endedUnixMs: 0 };
  const set = { name: 'web', desiredGeneration: 2, currentGeneration: 1, imagesDone: 1, imagesTotal: 2, lastFailedImage: '', lastFailureReason: '', lastFailureUnixMs: 0 };
  assert.deepEqual(boundNodeStatus({ ...base, staging, pinnedImageSets: [set] }), { ...base, staging, pinnedImageSets: [set] });
  const odd = boundNodeStatus({ ...base, staging: { ...staging, state: 'Exploded' as never, bytesDone: -5, reason: 'x' }, pinnedImageSets: Array.from({ length: 300 }, () => ({ ...set, lastFailureReason: 'r'.repeat(10_000), imagesDone: Number.NaN })) });
  assert.equal(odd.staging!.state, 'Failed');
  assert.equal(odd.staging!.reason, 'agent reported unknown staging state "Exploded": x');
  assert.equal(odd.staging!.bytesDone, 0);
  assert.equal(odd.pinnedImageSets!.length, 100, 'a pool names at most 100 sets, as MCO allows');
  assert.ok(odd.pinnedImageSets![0]!.lastFailureReason.length <= 4096);
  assert.equal(odd.pinnedImageSets![0]!.imagesDone, 0);
});
