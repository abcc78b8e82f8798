// Go's time.ParseDuration and Duration.String(), checked against the cases of Go's own tests
// (src/time/time_test.go: parseDurationTests, parseDurationErrorTests, durationTests).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatGoDuration, parseGoDuration } from '../../src/machineconfig/go-duration.ts';

const NS = 1n;
const US = 1000n;
const MS = 1000n * US;
const S = 1000n * MS;
const M = 60n * S;
const H = 60n * M;
const MIN_DURATION = -(1n << 63n);
const MAX_DURATION = (1n << 63n) - 1n;

test('ParseDuration: Go\'s cases, each to the nanosecond', () => {
  const cases: [string, bigint][] = [
    ['0', 0n], ['5s', 5n * S], ['30s', 30n * S], ['1478s', 1478n * S], ['-5s', -5n * S], ['+5s', 5n * S], ['-0', 0n], ['+0', 0n],
    ['5.0s', 5n * S], ['5.6s', 5n * S + 600n * MS], ['5.s', 5n * S], ['.5s', 500n * MS], ['1.0s', S], ['1.00s', S], ['1.004s', S + 4n * MS],
    ['1.0040s', S + 4n * MS], ['100.00100s', 100n * S + MS],
    ['10ns', 10n * NS], ['11us', 11n * US], ['12\u00b5s', 12n * US], ['12\u03bcs', 12n * US], ['13ms', 13n * MS], ['14s', 14n * S], ['15m', 15n * M], ['16h', 16n * H],
    ['3h30m', 3n * H + 30n * M], ['10.5s4m', 4n * M + 10n * S + 500n * MS], ['-2m3.4s', -(2n * M + 3n * S + 400n * MS)],
    ['1h2m3s4ms5us6ns', H + 2n * M + 3n * S + 4n * MS + 5n * US + 6n * NS], ['39h9m14.425s', 39n * H + 9n * M + 14n * S + 425n * MS],
    ['52763797000ns', 52763797000n], ['0.3333333333333333333h', 20n * M], ['9007199254740993ns', (1n << 53n) + 1n],
    ['9223372036854775807ns', MAX_DURATION], ['9223372036854775.807us', MAX_DURATION], ['9223372036s854ms775us807ns', MAX_DURATION],
    ['-9223372036854775808ns', MIN_DURATION], ['-9223372036854775.808us', MIN_DURATION], ['-9223372036s854ms775us808ns', MIN_DURATION],
    ['-2562047h47m16.854775808s', MIN_DURATION], ['0.100000000000000000000h', 6n * M], ['0.830103483285477580700h', 49n * M + 48n * S + 372539827n],
  ];
  for (const [text, ns] of cases) assert.deepEqual(parseGoDuration(text), { ns }, text);
});

test('ParseDuration: what Go refuses, with Go\'s message', () => {
  for (const text of ['', '3', '-', 's', '.', '-.', '.s', '+.s', '1d', '\x85\x85', '\xffff', 'hello \xffff world', '9223372036854775808ns', '9223372036854775.808us', '9223372036854ms775us808ns']) {
    assert.ok('error' in parseGoDuration(text), JSON.stringify(text));
  }
  assert.deepEqual(parseGoDuration('5'), { error: 'time: missing unit in duration "5"' });
  assert.deepEqual(parseGoDuration('1d'), { error: 'time: unknown unit "d" in duration "1d"' });
  assert.deepEqual(parseGoDuration('x'), { error: 'time: invalid duration "x"' });
});

test('Duration.String: Go\'s cases', () => {
  const cases: [string, bigint][] = [
    ['0s', 0n], ['1ns', NS], ['1.1\u00b5s', 1100n * NS], ['2.2ms', 2200n * US], ['3.3s', 3300n * MS], ['4m5s', 4n * M + 5n * S],
    ['4m5.001s', 4n * M + 5001n * MS], ['5h6m7.001s', 5n * H + 6n * M + 7001n * MS], ['8m0.000000001s', 8n * M + NS],
    ['2562047h47m16.854775807s', MAX_DURATION], ['-2562047h47m16.854775808s', MIN_DURATION],
  ];
  for (const [text, ns] of cases) assert.equal(formatGoDuration(ns), text);
  // What a KubeletConfig's durations become in the kubelet.conf MCO writes.
  assert.equal(formatGoDuration((parseGoDuration('5m') as { ns: bigint }).ns), '5m0s');
  assert.equal(formatGoDuration((parseGoDuration('1h') as { ns: bigint }).ns), '1h0m0s');
  assert.equal(formatGoDuration((parseGoDuration('90s') as { ns: bigint }).ns), '1m30s');
});
