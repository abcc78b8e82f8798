// The update's step table drives the journal's steps, the node's phases and the failpoints:
// a journal naming a step the table does not have is corrupt (the agent recovers from the disk),
// and a misspelt failpoint is refused instead of silently never firing.

import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Failpoints } from '../../src/agent/failpoints.ts';
import { Journal } from '../../src/agent/journal.ts';
import { FAILPOINTS, nextStep, UPDATE_PHASES, UPDATE_STEPS } from '../../src/agent/update-steps.ts';
import { ConfigurationError } from '../../src/machineconfig/index.ts';

test('the phases and failpoints are the step table\'s', () => {
  assert.deepEqual(UPDATE_PHASES, ['hooks', 'check', 'diff', 'plan', 'apply', 'actions', 'reboot', 'validate', 'health', 'try', 'rollback', 'done', 'drift']);
  assert.deepEqual(FAILPOINTS, ['before-updating', 'staging', 'committing', 'units-done', 'os-done', 'after-updating', 'before-rebooting', 'rebooting', 'after-rebooting', 'trying', 'rolling-back', 'staging-file', 'commit-file', 'rollback-files', 'hook-passed']);
  // A step kept after a failure is resumed (or undone when another config replaces it); every other one is undone at once.
  assert.deepEqual(UPDATE_STEPS.filter((s) => s.undo === null).map((s) => s.name), ['after-updating', 'rebooting', 'actions-done', 'validating', 'after-rebooting', 'health', 'trying', 'rolling-back', 'rollback-rebooting']);
});

test('MCPLANE_FAILPOINT naming no failpoint is refused, listing the failpoints', () => {
  assert.throws(() => new Failpoints('commiting'), (err: unknown) => err instanceof ConfigurationError && /"commiting" is not a failpoint; the failpoints are before-updating, staging, committing, /.test(err.message));
  assert.throws(() => new Failpoints('commit-file:x'), ConfigurationError);
  new Failpoints('commit-file:3').hit('staging');
});

test('a journal whose pending update names an unknown step is corrupt: moved aside, recovered from the disk', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-steps-'));
  writeFileSync(join(dir, 'journal.json'), JSON.stringify({ version: 1, currentConfig: 'a', currentSpec: null, currentPolicy: null, currentDriftPolicy: 'Degrade', backups: {}, pending: { id: 'x', from: 'a', to: 'b', step: 'teleporting' }, lastDisruption: '', failure: null }));
  const j = new Journal(dir);
  assert.equal(j.state.pending, null);
  assert.match(j.state.recovered!.cause, /^pending\.step "teleporting" is not a step of an update$/);
  assert.match(readFileSync(j.state.recovered!.movedTo, 'utf8'), /teleporting/);
});

test('the step table owns the transitions: each next names a step, and no file but step-advance.ts sets the journal\'s step', () => {
  const names = UPDATE_STEPS.map((s) => s.name as string);
  for (const s of UPDATE_STEPS) for (const to of Object.values(s.next)) assert.ok(names.includes(to), `${s.name} -> ${to}`);
  assert.equal(nextStep('os-done', 'reboot'), 'after-updating');
  assert.equal(nextStep('after-updating', 'reboot'), 'before-rebooting');
  assert.equal(nextStep('before-rebooting', 'reboot'), 'rebooting');
  assert.equal(nextStep('after-updating', 'applied'), 'actions-done');
  assert.throws(() => nextStep('check', 'booted'), /the step table has no transition from check on booted/);
  const dir = join(import.meta.dirname, '../../src/agent');
  const setters = readdirSync(dir).filter((f) => f.endsWith('.ts') && /\.step\s*=[^=]/.test(readFileSync(join(dir, f), 'utf8')));
  assert.deepEqual(setters, ['step-advance.ts']);
});
