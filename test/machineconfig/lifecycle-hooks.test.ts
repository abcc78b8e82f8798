// Lifecycle hooks, the pure part: the rules of spec.hooks and the mcplane.io/hooks annotation,
// the merge (pool first, then configs in name order), the `if` path conditions, and how an
// agent's report of the hooks it ran is bounded before it is stored.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  boundUpdateRecord,
  describeLifecycleHooks,
  diffSpecs,
  hookApplies,
  hookChangedPaths,
  mergeLifecycleHooks,
  parseHooksAnnotation,
  parseLifecycleHooks,
  ProblemCollector,
  type MachineConfigSpec,
} from '../../src/machineconfig/index.ts';

const problemsOf = (raw: unknown) => {
  const c = new ProblemCollector('MachineConfigPool/worker');
  const hooks = parseLifecycleHooks(raw, c);
  return { hooks, problems: c.problems.map((p) => `${p.field}: ${p.message}`) };
};

test('a valid hooks object is kept as written, with no defaults filled in', () => {
  const raw = { beforeRebooting: [{ run: ['/usr/bin/flush', '--all'], env: { DB: 'main' }, timeout: '5m', workDir: '/var/lib/db', if: ['/etc/db/*.conf'] }], afterRebooting: [{ run: ['/bin/true'] }] };
  const { hooks, problems } = problemsOf(raw);
  assert.deepEqual(problems, []);
  assert.deepEqual(hooks, raw);
  assert.equal(problemsOf(null).hooks, undefined);
});

test('each bad field is named with its rule', () => {
  const { problems } = problemsOf({
    beforeUpdating: [
      { run: ['systemctl', 'stop', 'haproxy'] },
      { run: [] },
      { run: ['/bin/true'], timeout: '0s' },
      { run: ['/bin/true'], timeout: '61m' },
      { run: ['/bin/true'], env: { 'A-B': 'x', OK: 'a\nb' } },
      { run: ['/bin/true'], workDir: '/var/../etc' },
      { run: ['/bin/true'], if: [] },
      { run: ['/bin/true'], if: ['/etc//x', 'relative'] },
      'just a string',
    ],
    afterUpdating: Array.from({ length: 17 }, () => ({ run: ['/bin/true'] })),
  });
  assert.deepEqual(problems, [
    'spec.hooks.beforeUpdating[0].run[0]: the command runs without a shell or PATH: its first word must be an absolute path, got "systemctl"',
    'spec.hooks.beforeUpdating[1].run[0]: the command runs without a shell or PATH: its first word must be an absolute path, got ""',
    'spec.hooks.beforeUpdating[2].timeout: a hook\'s timeout must be a duration from 1s to 1h such as 30s or 5m, got "0s"',
    'spec.hooks.beforeUpdating[3].timeout: a hook\'s timeout must be a duration from 1s to 1h such as 30s or 5m, got "61m"',
    'spec.hooks.beforeUpdating[4].env.A-B: "A-B" is not an environment variable name (letters, digits and _, not starting with a digit)',
    'spec.hooks.beforeUpdating[4].env.OK: may not hold a control character such as a newline',
    'spec.hooks.beforeUpdating[5].workDir: must be an absolute path without "." or ".." segments, got "/var/../etc"',
    'spec.hooks.beforeUpdating[6].if: an empty if never matches: leave it out to run the action on every update',
    'spec.hooks.beforeUpdating[7].if[0]: "/etc//x" has an empty path segment ("//")',
    'spec.hooks.beforeUpdating[7].if[1]: "relative" is not an absolute path: an entry starts with "/" (e.g. /etc/motd or /etc/chrony.d/*.conf)',
    'spec.hooks.beforeUpdating[8]: must be an object, got string "just a string"',
    'spec.hooks.afterUpdating: at most 16 actions per hook point, got 17',
  ]);
});

test('the annotation takes YAML or JSON of the same shape, its problems named under the annotation', () => {
  const c = new ProblemCollector('MachineConfig/60-x');
  assert.deepEqual(parseHooksAnnotation({ 'mcplane.io/hooks': 'afterUpdating: [{run: [/bin/true]}]' }, c), { afterUpdating: [{ run: ['/bin/true'] }] });
  assert.deepEqual(parseHooksAnnotation({ other: 'x' }, c), undefined);
  assert.equal(c.problems.length, 0);
  parseHooksAnnotation({ 'mcplane.io/hooks': '[1, 2]' }, c);
  parseHooksAnnotation({ 'mcplane.io/hooks': '{"afterRebooting": [{"run": ["true"]}]}' }, c);
  assert.deepEqual(c.problems.map((p) => `${p.field}: ${p.message}`), [
    'metadata.annotations[mcplane.io/hooks]: must be an object of hook points (beforeUpdating, afterUpdating, beforeRebooting, afterRebooting)',
    'metadata.annotations[mcplane.io/hooks].afterRebooting[0].run[0]: the command runs without a shell or PATH: its first word must be an absolute path, got "true"',
  ]);
});

test('a node\'s hooks are its pool\'s, then its configs\' in name order', () => {
  const a = (cmd: string) => ({ run: [cmd] });
  const merged = mergeLifecycleHooks({ beforeUpdating: [a('/pool')] }, [
    { name: '99-late', hooks: { beforeUpdating: [a('/late')], afterRebooting: [a('/late-after')] } },
    { name: '00-early', hooks: { beforeUpdating: [a('/early')] } },
    { name: '50-none', hooks: undefined },
  ]);
  assert.deepEqual(merged, { beforeUpdating: [a('/pool'), a('/early'), a('/late')], afterRebooting: [a('/late-after')] });
  assert.deepEqual(mergeLifecycleHooks(undefined, []), {});
});

test('`if` runs an action only when the update changes one of its paths (files, and units as /etc/systemd/system/<name>)', () => {
  const spec = (motd: string, unit: string): MachineConfigSpec => ({
    config: {
      ignition: { version: '3.4.0' },
      storage: { files: [{ path: '/etc/demo/motd', contents: { source: `data:,${motd}` } }] },
      systemd: { units: [{ name: 'demo.service', contents: unit }] },
      passwd: { users: [] },
    },
    kernelArguments: [], kernelType: 'default', fips: false, extensions: [], osImageURL: '', baseOSExtensionsContainerImage: '',
  } as unknown as MachineConfigSpec);
  const motdOnly = hookChangedPaths(diffSpecs(spec('a', 'u'), spec('b', 'u')));
  const unitOnly = hookChangedPaths(diffSpecs(spec('a', 'u'), spec('a', 'v')));
  assert.deepEqual(motdOnly, ['/etc/demo/motd']);
  assert.deepEqual(unitOnly, ['/etc/systemd/system/demo.service']);
  const onMotd = { run: ['/bin/true'], if: ['/etc/demo/*'] };
  const onUnits = { run: ['/bin/true'], if: ['/etc/systemd/system/'] };
  assert.equal(hookApplies(onMotd, motdOnly), true);
  assert.equal(hookApplies(onMotd, unitOnly), false);
  assert.equal(hookApplies(onUnits, unitOnly), true);
  assert.equal(hookApplies({ run: ['/bin/true'] }, []), true, 'no if: always');
  assert.equal(describeLifecycleHooks({ beforeUpdating: [onMotd, { run: ['/usr/bin/x', 'y'] }], afterRebooting: [onUnits] }, motdOnly), 'beforeUpdating: /bin/true, /usr/bin/x y');
});

test('the hooks an agent reports are bounded before they are stored: unknown points and results dropped, statuses in range', () => {
  const record = boundUpdateRecord({
    id: 'u1', fromConfig: 'a', toConfig: 'b', startedUnixMs: 1, endedUnixMs: 2, phases: [], disruption: '', result: 'Done', reason: '',
    hooks: [
      { point: 'beforeUpdating', index: 0, argv: ['/bin/true'], exitStatus: 0, durationMs: 12, result: 'success' },
      { point: 'whenever', index: 0, argv: [], exitStatus: 0, durationMs: 0, result: 'success' },
      { point: 'afterUpdating', index: 1, argv: ['/x'.repeat(300)], exitStatus: 99999, durationMs: -5, result: 'timeout' },
      { point: 'afterUpdating', index: 2, argv: [], exitStatus: 0, durationMs: 0, result: 'exploded' },
    ],
  })!;
  assert.equal(record.hooks!.length, 2);
  assert.deepEqual(record.hooks![0], { point: 'beforeUpdating', index: 0, argv: ['/bin/true'], exitStatus: 0, durationMs: 12, result: 'success' });
  assert.equal(record.hooks![1]!.exitStatus, -1);
  assert.equal(record.hooks![1]!.durationMs, 0);
  assert.ok(record.hooks![1]!.argv[0]!.length <= 256);
  assert.equal(boundUpdateRecord({ id: 'u2', phases: [] })!.hooks, undefined);
});
