// spec.driftIgnore's globs: what each matches (the agent's matcher) and what the pool's parser
// refuses, each problem naming the entry and the rule.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { driftIgnoreMatcher, MAX_DRIFT_IGNORE_ENTRIES } from '../../src/machineconfig/index.ts';
import { poolDoc, problemsOf } from '../helpers/manifests.ts';

const pool = (driftIgnore: unknown) => poolDoc('edge', { machineConfigSelector: {}, nodeSelector: {}, driftIgnore });

test('each glob matches what the shell would, within a segment, and ** and a trailing / across segments', () => {
  const cases: [string, string[], string[]][] = [
    ['/etc/motd', ['/etc/motd'], ['/etc/motd2', '/etc/motd/x', '/etc']],
    ['/etc/chrony.d/*.conf', ['/etc/chrony.d/a.conf', '/etc/chrony.d/.conf'], ['/etc/chrony.d/a/b.conf', '/etc/chrony.d/a.confx']],
    ['/etc/app/node-?.yaml', ['/etc/app/node-1.yaml'], ['/etc/app/node-12.yaml', '/etc/app/node-/.yaml']],
    ['/etc/app/[ab]*.conf', ['/etc/app/a.conf', '/etc/app/bz.conf'], ['/etc/app/c.conf']],
    ['/etc/app/[!a-c]x', ['/etc/app/dx'], ['/etc/app/bx', '/etc/app//x']],
    ['/etc/**/local.conf', ['/etc/local.conf', '/etc/a/local.conf', '/etc/a/b/local.conf'], ['/etc/a/local.conf.bak', '/var/local.conf']],
    ['/etc/hand-managed/', ['/etc/hand-managed/x', '/etc/hand-managed/a/b'], ['/etc/hand-managedx/y', '/etc/other']],
    ['/etc/a+b(c).conf', ['/etc/a+b(c).conf'], ['/etc/aab(c).conf']],
  ];
  for (const [glob, yes, no] of cases) {
    const ignored = driftIgnoreMatcher([glob]);
    for (const p of yes) assert.ok(ignored(p), `${glob} matches ${p}`);
    for (const p of no) assert.ok(!ignored(p), `${glob} does not match ${p}`);
  }
  assert.ok(!driftIgnoreMatcher([])('/etc/motd'));
});

test('a pool with valid entries parses; each bad entry is refused naming the pool, the entry and the rule', () => {
  assert.deepEqual(problemsOf(pool(['/etc/motd', '/etc/**/x.conf', '/etc/dir/'])), []);
  const problems = problemsOf(pool(['etc/motd', '/etc/**x/y', '/etc/[ab', '/etc/../shadow', '/etc//x', '/', '', '/etc/a\\*', '/etc/\u0007', 7, '/etc/motd', '/etc/motd']));
  const by = new Map(problems.map((p) => [p.field, p]));
  const expect = (i: number, rule: string, message: RegExp) => {
    const p = by.get(`spec.driftIgnore[${i}]`);
    assert.ok(p, `a problem for entry ${i}: ${JSON.stringify(problems)}`);
    assert.equal(p.object, 'MachineConfigPool/edge');
    assert.equal(p.rule, rule);
    assert.match(p.message, message);
  };
  expect(0, 'drift-ignore', /^"etc\/motd" is not an absolute path: an entry starts with "\/"/);
  expect(1, 'drift-ignore', /"\*\*" must be a whole path segment/);
  expect(2, 'drift-ignore', /the "\[" at "\[ab" is never closed with "\]"/);
  expect(3, 'drift-ignore', /has a "\.\." segment/);
  expect(4, 'drift-ignore', /has an empty path segment/);
  expect(5, 'drift-ignore', /would ignore every managed file/);
  expect(6, 'drift-ignore', /may not be empty/);
  expect(7, 'drift-ignore', /backslash escapes are not supported/);
  expect(8, 'drift-ignore', /contains a control character/);
  assert.ok(by.get('spec.driftIgnore[9]'), 'a number is not a string');
  expect(11, 'duplicate', /"\/etc\/motd" is listed twice/);
  const many = problemsOf(pool(Array.from({ length: MAX_DRIFT_IGNORE_ENTRIES + 1 }, (_, i) => `/etc/${i}`)));
  assert.deepEqual(many.map((p) => [p.field, p.rule]), [['spec.driftIgnore', 'max-items']]);
  assert.deepEqual(problemsOf(pool('/etc/motd')).map((p) => p.field), ['spec.driftIgnore']);
});

test('driftPolicy takes Adopt; an unknown policy names the three', () => {
  assert.deepEqual(problemsOf(poolDoc('edge', { machineConfigSelector: {}, nodeSelector: {}, driftPolicy: 'Adopt' })), []);
  const [p] = problemsOf(poolDoc('edge', { machineConfigSelector: {}, nodeSelector: {}, driftPolicy: 'Ignore' }));
  assert.equal(p!.message, 'driftPolicy "Ignore" is not one of Degrade, Reconcile, Adopt');
});
