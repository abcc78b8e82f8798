import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { defaultPools, renderPool } from '../../src/machineconfig/index.ts';
import { hashedJson } from '../../src/machineconfig/hashed-json.ts';
import { fileEntry, ign, mcDoc, parseValid } from '../helpers/manifests.ts';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

function assertSameAsStringify(value: unknown, what: string): void {
  const expected = JSON.stringify(value);
  const got = hashedJson(value);
  assert.equal(got.text, expected, `${what}: text`);
  assert.equal(got.bytes, Buffer.byteLength(expected), `${what}: bytes`);
  assert.equal(got.sha256, sha256(expected), `${what}: sha256`);
}

test('hashedJson gives JSON.stringify\'s text, its UTF-8 size and its SHA-256, for long lists split into slices too', () => {
  const long = (n: number, f: (i: number) => unknown) => Array.from({ length: n }, (_, i) => f(i));
  const cases: [string, unknown][] = [
    ['empty object', {}],
    ['empty list', []],
    ['scalars', { s: 'x', n: 1.5, z: -0, nan: NaN, inf: Infinity, t: true, f: false, nil: null }],
    ['members JSON.stringify leaves out', { a: undefined, b: () => 1, c: Symbol('s'), d: 1 }],
    ['list holes and values JSON.stringify writes as null', long(300, (i) => (i % 3 === 0 ? undefined : i % 3 === 1 ? () => i : i))],
    ['sparse long list', (() => { const a: unknown[] = []; a[250] = 'x'; return a; })()],
    ['key order: integer keys first, then insertion order', { b: 1, 10: 2, a: 3, 2: 4, '': 5 }],
    ['keys that need escaping', { 'a"b': 1, 'c\\d': 2, 'e\nf': 3, 'ü': 4, '\u2028': 5 }],
    ['non-ASCII and lone surrogates (UTF-8 size)', { s: 'é€😀', lone: '\ud800x', list: long(200, (i) => `ü${i}\udc00`) }],
    ['long lists at the slice edges', { a127: long(127, (i) => i), a128: long(128, (i) => i), a129: long(129, (i) => i), a256: long(256, (i) => ({ i })), a257: long(257, (i) => [i]) }],
    ['long lists of long lists, nested in objects', { x: { y: long(140, (i) => long(130, (j) => `${i}-${j}`)) } }],
    ['toJSON and non-plain objects are JSON.stringify\'s own', { d: new Date(0), m: new Map([[1, 2]]), t: { toJSON: () => 'T' }, l: Object.assign(long(200, (i) => i), { extra: 1 }) }],
    ['a null-prototype object', Object.assign(Object.create(null) as object, { b: 1, a: long(200, (i) => i) })],
    ['a top-level string', 'plain'],
  ];
  for (const [what, value] of cases) assertSameAsStringify(value, what);
});

test('a rendered pool\'s specJson is JSON.stringify of its spec, and its name hashes those bytes', () => {
  // 300 files over 30 configs (more than one slice), units, a directory and a link, non-ASCII text.
  const docs = Array.from({ length: 30 }, (_, i) => mcDoc(`${String(i).padStart(2, '0')}-x`, 'worker', {
    config: ign('3.4.0', {
      storage: {
        files: Array.from({ length: 10 }, (_, j) => fileEntry(`/etc/x/${i}-${j}`, `ü ${i} ${j}\n`, j === 0 ? { user: { name: 'core' }, group: { id: 5 } } : {})),
        ...(i === 3 ? { directories: [{ path: '/etc/x/d', mode: 0o755 }], links: [{ path: '/etc/x/l', target: '/etc/x/3-1' }] } : {}),
      },
      systemd: { units: [{ name: `u${i}.service`, enabled: true, contents: '[Unit]\nDescription=é\n' }] },
    }),
    kernelArguments: [`k${i}=ü`],
  }));
  const rendered = renderPool(defaultPools()[1]!, parseValid(...docs).configs);
  assert.equal(rendered.spec.config.storage.files.length, 300);
  assert.equal(rendered.specJson, JSON.stringify(rendered.spec));
  assert.equal(rendered.hash, sha256(rendered.specJson).slice(0, 32));
  assert.equal(rendered.name, `rendered-worker-${rendered.hash}`);
});
