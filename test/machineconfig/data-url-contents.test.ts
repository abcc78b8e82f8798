import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { decodeDataUrl } from '../../src/machineconfig/index.ts';
import { fileText, ign, mcDoc, parseValid, problemsOf } from '../helpers/manifests.ts';

const withSource = (source: string, extra: Record<string, unknown> = {}) =>
  mcDoc('a', 'worker', { config: ign('3.4.0', { storage: { files: [{ path: '/etc/a', contents: { source, ...extra } }] } }) });

const textOf = (source: string, extra?: Record<string, unknown>) =>
  fileText(parseValid(withSource(source, extra)).configs[0]!.spec.config.storage.files[0]!.contents.source);

test('base64 data URL with a media type', () => {
  assert.equal(textOf('data:text/plain;charset=utf-8;base64,aGVsbG8K'), 'hello\n');
});

test('percent-encoded data URL, including bytes that are not UTF-8', () => {
  assert.equal(textOf('data:,a%20b%0Ac'), 'a b\nc');
  assert.equal(textOf('data:,test'), 'test');
  const decoded = decodeDataUrl('data:,%FF%00');
  assert.ok('bytes' in decoded);
  assert.deepEqual([...decoded.bytes], [0xff, 0x00]);
});

test('gzip compression is decoded', () => {
  const gz = gzipSync(Buffer.from('compressed content'));
  assert.equal(textOf('data:;base64,' + gz.toString('base64'), { compression: 'gzip' }), 'compressed content');
});

test('verification hash is checked against the source bytes', () => {
  const sum = createHash('sha512').update('hello').digest('hex');
  assert.equal(textOf('data:,hello', { verification: { hash: `sha512-${sum}` } }), 'hello');
  const problems = problemsOf(withSource('data:,other', { verification: { hash: `sha512-${sum}` } }));
  assert.equal(problems[0]!.rule, 'content-hash');
});

test('malformed data URLs are refused with the reason', () => {
  const cases: [string, RegExp][] = [
    ['data:text/plain;base64', /no ","/],
    ['data:;base64,not base64!', /not valid padded base64/],
    ['data:,bad%zzescape', /bad percent escape/],
  ];
  for (const [source, reason] of cases) {
    const problems = problemsOf(withSource(source));
    assert.equal(problems.length, 1, source);
    assert.equal(problems[0]!.rule, 'data-url');
    assert.equal(problems[0]!.field, 'spec.config.storage.files[0].contents.source');
    assert.match(problems[0]!.message, reason);
  }
});

test('bad gzip and unknown compression are refused', () => {
  assert.equal(problemsOf(withSource('data:,notgzip', { compression: 'gzip' }))[0]!.rule, 'compression');
  assert.equal(problemsOf(withSource('data:,x', { compression: 'xz' }))[0]!.rule, 'compression');
});

test('remote sources are refused: a MachineConfig must be static', () => {
  for (const source of ['https://example.com/f', 'http://x/y', 's3://bucket/key', 'tftp://h/f', 'gs://b/o']) {
    const problems = problemsOf(withSource(source));
    assert.equal(problems[0]!.rule, 'remote-source', source);
    assert.match(problems[0]!.message, /must be static/);
  }
  const merge = problemsOf(mcDoc('m', 'worker', { config: { ignition: { version: '3.4.0', config: { merge: [{ source: 'https://x' }] } } } }));
  assert.equal(merge[0]!.rule, 'remote-config');
});

test('equal bytes in different spellings normalize to one source', () => {
  const a = parseValid(withSource('data:,hi')).configs[0]!.spec.config.storage.files[0]!.contents.source;
  const b = parseValid(withSource('data:text/plain;base64,aGk=')).configs[0]!.spec.config.storage.files[0]!.contents.source;
  assert.equal(a, b);
  assert.equal(a, 'data:;base64,aGk=');
});

test('one apply cannot multiply its size with gzip: all its configs share an 8 MiB decoded budget', () => {
  // Each config holds 1.4 MiB (under its own limit) in a few kilobytes of gzip.
  const gz = gzipSync(Buffer.alloc(1.4 * 1024 * 1024)).toString('base64');
  const docs = Array.from({ length: 12 }, (_, i) =>
    mcDoc(`c${i}`, 'worker', { config: ign('3.4.0', { storage: { files: [{ path: '/etc/z', contents: { source: 'data:;base64,' + gz, compression: 'gzip' } }] } }) }));
  const problems = problemsOf(...docs);
  // Five fit (7 MiB); each later one finds less than 1.4 MiB left.
  assert.deepEqual(problems.map((p) => [p.object, p.rule]), [5, 6, 7, 8, 9, 10, 11].map((i) => [`MachineConfig/c${i}`, 'contents-size']));
  assert.match(problems[0]!.message, /limit of 8 MiB \(8388608 bytes\) for all MachineConfigs of one apply \(7 MiB \(7340030 bytes\) already used before this file\)/);
});

test('decoding stops at the limit for base64 and percent-encoded data too', () => {
  const big = 'x'.repeat(1.5 * 1024 * 1024 + 1);
  assert.equal(problemsOf(withSource('data:,' + big))[0]!.rule, 'contents-size');
  assert.equal(problemsOf(withSource('data:;base64,' + Buffer.from(big).toString('base64')))[0]!.rule, 'contents-size');
  assert.equal(problemsOf(withSource('data:text/plain;base64,' + Buffer.from(big).toString('base64'), { verification: { hash: 'sha256-00' } }))[0]!.rule, 'contents-size');
});
