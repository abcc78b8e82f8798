// The pieces every human output of mcctl goes through (format.ts, output.ts), without a server;
// terminal-escapes.test.ts follows them through the real binary.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse } from 'yaml';
import { forDisplay, formatRow, table } from '../../src/cli/format.ts';
import { formatObject, formatOne } from '../../src/cli/output.ts';

test('table cells are escaped before the columns are measured: rows stay one line and aligned', () => {
  const out = table(['NAME', 'REASON', 'AGE'], [['n1', 'a\nb\u001b[2J', '1s'], ['n2', 'ok', '2s']]);
  assert.equal(out, 'NAME   REASON        AGE\nn1     a\\nb\\x1b[2J   1s\nn2     ok            2s\n');
  assert.equal(formatRow(['x\ty', 3], [4, 1]), 'x\\ty   3');
});

test('forDisplay escapes every string, object keys included, and leaves the shape and other values alone', () => {
  const node = { name: 'n1', labels: { 'k\u001b': 'v\n' }, status: { reason: '\u009b2J', connected: true, drift: [{ path: '/a\rb', detectedUnixMs: 5 }] }, raw: Buffer.from('\n') };
  const shown = forDisplay(node);
  assert.deepEqual(shown, { name: 'n1', labels: { 'k\\x1b': 'v\\n' }, status: { reason: '\\x9b2J', connected: true, drift: [{ path: '/a\\rb', detectedUnixMs: 5 }] }, raw: node.raw });
  assert.equal(node.status.reason, '\u009b2J', 'the original is not changed');
});

test('-o json escapes DEL, C1 and bidi controls as \\uXXXX and parses back to the same value; yaml parses back too', () => {
  const value = { reason: 'a\u007f\u0085\u009b2J\u2028\u202eb\n\u001b' };
  for (const text of [formatObject(value, 'json'), formatOne(value, { kind: 'json' })]) {
    assert.doesNotMatch(text, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u202e]/);
    assert.deepEqual(JSON.parse(text), value);
  }
  assert.deepEqual(parse(formatObject(value, 'yaml')), value);
});
