import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultPools, diffSpecs, isEmptyDiff, needsDrain, planDisruption, renderPool, splitKernelArguments, updateActionOf } from '../../src/machineconfig/index.ts';
import { fileEntry, ign, mcDoc, parseValid, poolDoc } from '../helpers/manifests.ts';

const worker = defaultPools()[1]!;
const render = (...docs: Record<string, unknown>[]) => renderPool(worker, parseValid(...docs).configs).spec;
const file = (path: string, text: string) => mcDoc(`f-${path.replaceAll('/', '-').slice(1)}`, 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry(path, text)] } }) });
const keys = (...k: string[]) => mcDoc('keys', 'worker', { config: ign('3.4.0', { passwd: { users: [{ name: 'core', sshAuthorizedKeys: k }] } }) });

test('the same config twice is an empty diff and needs nothing', () => {
  const a = render(file('/etc/a', 'x'));
  const diff = diffSpecs(a, render(file('/etc/a', 'x')));
  assert.ok(isEmptyDiff(diff));
  assert.deepEqual(planDisruption(diff, undefined), { reboot: false, rebootReasons: [], actions: [], decisions: [] });
});

test('a file with no policy reboots, and the reason names the file', () => {
  const plan = planDisruption(diffSpecs(render(), render(file('/etc/chrony.conf', 'server x'))), undefined);
  assert.equal(plan.reboot, true);
  assert.deepEqual(plan.rebootReasons, ['file /etc/chrony.conf added: no disruption policy covers it']);
  assert.deepEqual(plan.decisions, [{ change: 'file /etc/chrony.conf added', actions: [{ type: 'reboot' }], rule: 'default: no disruption policy entry covers it, so it reboots' }]);
});

test('SSH key changes apply without a reboot', () => {
  const plan = planDisruption(diffSpecs(render(keys('a')), render(keys('a', 'b'))), undefined);
  assert.deepEqual(plan, { reboot: false, rebootReasons: [], actions: [], decisions: [{ change: 'core SSH keys changed', actions: [], rule: 'default: SSH key changes need no disruption' }] });
});

test('OS image, kargs, kernelType, extensions and fips always reboot, whatever the policy', () => {
  const policy = { files: [{ path: '/', actions: [{ type: 'none' as const }] }] };
  const base = render();
  for (const spec of [{ osImageURL: 'quay.io/x@sha256:1' }, { kernelArguments: ['a'] }, { kernelType: 'realtime' }, { extensions: ['usbguard'] }, { fips: true }]) {
    const plan = planDisruption(diffSpecs(base, render(mcDoc('x', 'worker', spec))), policy);
    assert.equal(plan.reboot, true, JSON.stringify(spec));
    assert.equal(plan.decisions.length, 1);
    assert.match(plan.decisions[0]!.rule, /^default: \w+ changes always reboot/);
    assert.equal(plan.decisions[0]!.entry, undefined);
  }
});

test('longest prefix wins; a reboot anywhere wins over everything', () => {
  const { pools: [pool] } = parseValid(poolDoc('worker', {
    disruptionPolicy: {
      files: [
        { path: '/etc/', actions: [{ type: 'reboot' }] },
        { path: '/etc/chrony', actions: [{ type: 'restart', unit: 'chronyd.service' }] },
        { path: '/etc/chrony.d/', actions: [{ type: 'reload', unit: 'chronyd.service' }, { type: 'daemon-reload' }] },
      ],
    },
  }));
  const policy = pool!.spec.disruptionPolicy;
  const only = (f: Record<string, unknown>) => planDisruption(diffSpecs(render(), render(f)), policy);
  assert.deepEqual(only(file('/etc/chrony.conf', 'x')), {
    reboot: false, rebootReasons: [], actions: [{ type: 'restart', unit: 'chronyd.service' }],
    decisions: [{ change: 'file /etc/chrony.conf added', actions: [{ type: 'restart', unit: 'chronyd.service' }], entry: { kind: 'files', key: '/etc/chrony' }, rule: 'policy files /etc/chrony' }],
  });
  assert.deepEqual(only(file('/etc/chrony.d/a.conf', 'x')).actions, [{ type: 'daemon-reload' }, { type: 'reload', unit: 'chronyd.service' }]);
  const both = planDisruption(diffSpecs(render(), render(file('/etc/chrony.conf', 'x'), file('/etc/other', 'y'))), policy);
  assert.equal(both.reboot, true);
  assert.deepEqual(both.actions, []);
  assert.deepEqual(both.rebootReasons, ['file /etc/other added: policy says reboot']);
  // Each change keeps its own rule, the one that did not reboot too.
  assert.deepEqual(both.decisions.map((d) => [d.change, d.actions.map((a) => a.type).join(','), d.entry?.key]), [
    ['file /etc/chrony.conf added', 'restart', '/etc/chrony'],
    ['file /etc/other added', 'reboot', '/etc/'],
  ]);
});

test('removing a karg deletes it again; entries with spaces and quotes are split like MCO', () => {
  const diff = diffSpecs(render(mcDoc('k', 'worker', { kernelArguments: ['selinux=0', 'a=1'] })), render(mcDoc('k', 'worker', { kernelArguments: ['a=1'] })));
  assert.deepEqual(diff.kernelArguments, { remove: ['selinux=0'], add: [] });
  assert.deepEqual(splitKernelArguments(['a=1 b=2', 'dyndbg="file x +p"']), ['a=1', 'b=2', 'dyndbg="file x +p"']);
});

test('removed files and units are changes too', () => {
  const diff = diffSpecs(render(file('/etc/a', 'x'), mcDoc('u', 'worker', { config: ign('3.4.0', { systemd: { units: [{ name: 'a.service', contents: 'x' }] } }) })), render());
  assert.deepEqual(diff.files, [{ path: '/etc/a', change: 'removed' }]);
  assert.deepEqual(diff.units, [{ name: 'a.service', change: 'removed' }]);
});

test('one word per update: a reboot drains, a drain action drains without a reboot, else the strongest action', () => {
  const { pools: [pool] } = parseValid(poolDoc('worker', {
    disruptionPolicy: {
      files: [
        { path: '/etc/app/', actions: [{ type: 'drain' }, { type: 'restart', unit: 'app.service' }] },
        { path: '/etc/chrony.conf', actions: [{ type: 'reload', unit: 'chronyd.service' }] },
        { path: '/etc/motd', actions: [{ type: 'none' }] },
      ],
    },
  }));
  const policy = pool!.spec.disruptionPolicy;
  const plan = (...f: Record<string, unknown>[]) => planDisruption(diffSpecs(render(), render(...f)), policy);
  const drained = plan(file('/etc/app/a.conf', 'x'), file('/etc/chrony.conf', 'y'));
  assert.deepEqual(drained.actions, [{ type: 'reload', unit: 'chronyd.service' }, { type: 'restart', unit: 'app.service' }, { type: 'drain' }]);
  assert.equal(updateActionOf(drained), 'drain');
  assert.equal(needsDrain(drained), true);
  assert.equal(updateActionOf(plan(file('/etc/chrony.conf', 'y'))), 'reload');
  assert.equal(needsDrain(plan(file('/etc/chrony.conf', 'y'))), false);
  assert.equal(updateActionOf(plan(file('/etc/motd', 'm'))), 'none');
  const rebooted = plan(file('/etc/other', 'z'));
  assert.equal(updateActionOf(rebooted), 'reboot');
  assert.equal(needsDrain(rebooted), true);
});
