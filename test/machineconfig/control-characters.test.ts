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
