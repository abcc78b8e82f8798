// One duration syntax for soak, health check timeout and maintenance window length.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { durationMs } from '../../src/machineconfig/index.ts';

test('days, hours, minutes and seconds, in that order, each optional', () => {
  assert.equal(durationMs('1h30m'), 5_400_000);
  assert.equal(durationMs('90s'), 90_000);
  assert.equal(durationMs('1d'), 86_400_000);
  assert.equal(durationMs('1d2h3m4s'), ((26 * 60 + 3) * 60 + 4) * 1000);
  assert.equal(durationMs('0s'), 0);
});

test('anything else is not a duration', () => {
  for (const text of ['', '10 minutes', '1m1h', '1.5h', '-1h', '1w', 'h', '2H']) assert.equal(durationMs(text), undefined, text);
});

test('digits past what a Date can hold are not a duration', () => {
  assert.equal(durationMs('99999999999999999999d'), undefined);
  assert.equal(durationMs('9'.repeat(400) + 's'), undefined);
  assert.equal(durationMs('100000000d'), 8.64e15);
});
