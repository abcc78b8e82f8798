// resource.Quantity as Go parses and writes it, checked against what apimachinery's own code
// printed for each case (test/fixtures/go-quantity), and through the two configs that write one:
// a KubeletConfig's reservedMemory and a ContainerRuntimeConfig's overlaySize and logSizeMax.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseQuantity } from '../../src/machineconfig/quantity.ts';

interface GoCase { json: string; string?: string; value?: string; error?: string }
const cases = JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/go-quantity/quantity-outputs.json'), 'utf8')) as GoCase[];

test('every case: String(), Value() and the error are what Go printed', () => {
  const wrong: string[] = [];
  let checked = 0;
  for (const c of cases) {
    const raw = JSON.parse(c.json) as string | number | null;
    if (raw === null) continue; // null is the zero Quantity before ParseQuantity is reached
    if (typeof raw === 'number' && !Number.isSafeInteger(raw) && Number.isInteger(raw)) continue; // refused on purpose: see below
    checked++;
    const q = parseQuantity(raw);
    const got = 'error' in q ? `error ${q.error}` : `${q.text} = ${q.value}`;
    // value is a number: Go's int64 as the nearest double (exact below 2^53).
    const want = c.error !== undefined ? `error ${c.error}` : `${c.string} = ${Number(c.value)}`;
    if (got !== want) wrong.push(`${c.json}: got ${got}, Go: ${want}`);
  }
  assert.ok(checked > 400, `${checked} cases`);
  assert.deepEqual(wrong, []);
});

test('the forms that matter on a host: canonical suffixes, fractions in milli, the input kept when Go keeps it', () => {
  const text = (raw: string) => { const q = parseQuantity(raw); return 'error' in q ? q.error : q.text; };
  assert.equal(text('1024Mi'), '1Gi');
  assert.equal(text('1.5Gi'), '1536Mi');
  assert.equal(text('1.15Gi'), '1234803097600m'); // not a whole number of bytes: DecimalSI, exact
  assert.equal(text('1.5G'), '1500M');
  assert.equal(text('1e14'), '100e12');
  assert.equal(text('+1Gi'), '+1Gi'); // the fast path found it canonical and kept the string
  assert.equal(text('1Gi '), '1Gi'); // UnmarshalJSON trims
  assert.match(text('1i'), /unable to parse quantity's suffix/);
});

test('exponents far out of range cost nothing: no number of two billion digits is made', () => {
  const started = process.hrtime.bigint();
  for (const raw of ['1e2000000000', '1.1234567890123456789e-2000000000', '1234567890123456789012e2000000000']) {
    const q = parseQuantity(raw);
    assert.ok(!('error' in q), raw);
  }
  assert.ok(process.hrtime.bigint() - started < 1_000_000_000n);
});

test('refused where Go\'s own arithmetic gives up or the value cannot reach it as written, each with its reason', () => {
  const error = (raw: string | number) => { const q = parseQuantity(raw); return 'error' in q ? q.error : `accepted as ${q.text}`; };
  // A length at which BigInt work would hold the server for seconds (Go takes it, slowly).
  assert.equal(error(`1${'0'.repeat(100_000)}`), 'a quantity of 100001 characters is refused (at most 1000)');
  assert.doesNotMatch(error(`1${'0'.repeat(999)}`), /refused/);
  // Near int32's end Go wraps the exponent (or loops for billions of steps).
  assert.match(error('1e2147483000'), /^the exponent 2147483000 is refused: beyond ±2147479552, Go's int32 arithmetic wraps it$/);
  // An integer YAML has read into a double past 2^53 may already be another number.
  assert.match(error(9007199254740993), /^9007199254740992 is past 2\^53, where a number may already have been rounded as the YAML was read; write the quantity as a string$/);
  // Go trims the spaces its JSON writes as they are, not a newline or a tab, which it escapes.
  assert.equal(error('\u00a01Gi '), 'accepted as 1Gi');
  assert.match(error('1Gi\n'), /^quantities must match the regular expression/);
  assert.equal(error('-Pi'), 'unable to parse numeric part of quantity');
});
