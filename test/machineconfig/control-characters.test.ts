import assert from 'node:assert/strict';
import { test } from 'node:test';
import { quote } from '../../src/machineconfig/control-characters.ts';
import { mcDoc, problemsOf } from '../helpers/manifests.ts';

test('quote escapes every control character and cuts long values', () => {
  assert.equal(quote('a\nb\u007f\u0085'), '"a\\nb\\u007f\\u0085"');
  assert.equal(quote('x'.repeat(300), 5), '"xxxxx…" (300 characters)');
});

test('an unknown key with a newline cannot forge a field path or a line', () => {
  const [p] = problemsOf(mcDoc('a', 'worker', { 'evil\nkey': 1 }));
  assert.equal(p!.rule, 'unknown-field');
  assert.equal(p!.field, 'spec["evil\\nkey"]');
  assert.match(p!.message, /^unknown field "evil\\nkey"/);
});

test('escapeControlCharacters shows every control and format character as a visible escape, once', async () => {
  const { escapeControlCharacters } = await import('../../src/machineconfig/control-characters.ts');
  assert.equal(escapeControlCharacters('a\nb\r\tc\u0000\u001b[2J\u001b]0;t\u0007\u007f\u0085\u009b1m\u2028\u202e\u2066z'),
    'a\\nb\\r\\tc\\x00\\x1b[2J\\x1b]0;t\\x07\\x7f\\x85\\x9b1m\\u2028\\u202e\\u2066z');
  // Printable text, backslashes and non-Latin letters stay as they are.
  assert.equal(escapeControlCharacters('C:\\path é 日本 ✓'), 'C:\\path é 日本 ✓');
  const once = escapeControlCharacters('x\u001b\ny');
  assert.equal(escapeControlCharacters(once), once, 'escaping twice changes nothing');
  assert.equal(escapeControlCharacters('line 1\nline\t2\u001b\r', { multiline: true }), 'line 1\nline\t2\\x1b\\r');
});
