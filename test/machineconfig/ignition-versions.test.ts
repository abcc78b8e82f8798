import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SUPPORTED_IGNITION_VERSIONS } from '../../src/machineconfig/index.ts';
import { fileEntry, fileText, ign, mcDoc, parseValid, problemsOf } from '../helpers/manifests.ts';

test('every supported version converts to the internal 3.4.0 form', () => {
  for (const version of SUPPORTED_IGNITION_VERSIONS) {
    const file = version.startsWith('2.') ? { ...fileEntry('/etc/a', 'x'), filesystem: 'root' } : fileEntry('/etc/a', 'x');
    const { configs } = parseValid(mcDoc('a', 'worker', { config: ign(version, { storage: { files: [file] } }) }));
    const config = configs[0]!.spec.config;
    assert.equal(config.ignition.version, '3.4.0', version);
    assert.equal(fileText(config.storage.files[0]!.contents.source), 'x', version);
  }
});

test('an unknown version is refused and the supported ones are listed', () => {
  const problems = problemsOf(mcDoc('a', 'worker', { config: ign('3.6.0') }));
  assert.equal(problems.length, 1);
  assert.equal(problems[0]!.field, 'spec.config.ignition.version');
  assert.equal(problems[0]!.rule, 'ignition-version');
  assert.match(problems[0]!.message, /2\.2\.0, 3\.0\.0, 3\.1\.0, 3\.2\.0, 3\.3\.0, 3\.4\.0, 3\.5\.0/);
  assert.equal(problemsOf(mcDoc('b', 'worker', { config: { storage: {} } }))[0]!.rule, 'ignition-version');
});

test('no config at all, or an empty one, is an empty Ignition config', () => {
  const { configs } = parseValid(mcDoc('a', 'worker', { kernelArguments: ['x'] }), mcDoc('b', 'worker', { config: {} }));
  for (const mc of configs) {
    assert.deepEqual(mc.spec.config.storage.files, []);
    assert.deepEqual(mc.spec.config.systemd.units, []);
  }
});

test('2.2: empty sections are accepted (networkd, passwd, config.replace.verification, security.tls, timeouts)', () => {
  parseValid(mcDoc('a', 'worker', {
    config: {
      ignition: { version: '2.2.0', config: { replace: { verification: {} } }, security: { tls: {} }, timeouts: {} },
      networkd: {},
      passwd: {},
      storage: { files: [{ ...fileEntry('/etc/a', 'x'), filesystem: 'root', contents: { source: 'data:,x', verification: {} } }] },
    },
  }));
});

test('2.2: only the root filesystem', () => {
  const problems = problemsOf(mcDoc('a', 'worker', { config: ign('2.2.0', { storage: { files: [{ ...fileEntry('/etc/a', 'x'), filesystem: 'oem' }] } }) }));
  assert.equal(problems[0]!.rule, 'ignition2-filesystem');
  assert.equal(problems[0]!.field, 'spec.config.storage.files[0].filesystem');
});

test('2.2: files deduplicated by path and units by name, last wins', () => {
  const { configs } = parseValid(mcDoc('a', 'worker', {
    config: ign('2.2.0', {
      storage: { files: [{ ...fileEntry('/etc/a', 'first'), filesystem: 'root' }, { ...fileEntry('/etc/a', 'second'), filesystem: 'root' }] },
      systemd: { units: [{ name: 'a.service', contents: 'one' }, { name: 'a.service', contents: 'two', enable: true }] },
    }),
  }));
  const config = configs[0]!.spec.config;
  assert.equal(config.storage.files.length, 1);
  assert.equal(fileText(config.storage.files[0]!.contents.source), 'second');
  assert.deepEqual(config.systemd.units, [{ name: 'a.service', contents: 'two', enabled: true }]);
});

test('3.x: a duplicate path or unit is an error, as Ignition itself says', () => {
  const problems = problemsOf(mcDoc('a', 'worker', {
    config: ign('3.2.0', {
      storage: { files: [fileEntry('/etc/a', '1'), fileEntry('/etc/a', '2')] },
      systemd: { units: [{ name: 'a.service' }, { name: 'a.service' }] },
    }),
  }));
  assert.deepEqual(problems.map((p) => p.rule), ['duplicate-path', 'duplicate-unit']);
});

test('units: enabled, mask, contents and dropins are kept; names are checked', () => {
  const { configs } = parseValid(mcDoc('a', 'worker', {
    config: ign('3.4.0', { systemd: { units: [{ name: 'x.service', enabled: false, mask: true, dropins: [{ name: '10-a.conf', contents: '[Service]' }] }] } }),
  }));
  assert.deepEqual(configs[0]!.spec.config.systemd.units[0], { name: 'x.service', enabled: false, mask: true, dropins: [{ name: '10-a.conf', contents: '[Service]' }] });
  const problems = problemsOf(mcDoc('b', 'worker', {
    config: ign('3.4.0', { systemd: { units: [{ name: 'noext' }, { name: 'a/b.service' }, { name: 'ok.timer', dropins: [{ name: 'x.txt' }] }] } }),
  }));
  assert.deepEqual(problems.map((p) => `${p.field}:${p.rule}`), [
    'spec.config.systemd.units[0].name:unit-name',
    'spec.config.systemd.units[1].name:unit-name',
    'spec.config.systemd.units[2].dropins[0].name:dropin-name',
  ]);
});

test('file owner is kept; no contents is an empty file; default mode 0644', () => {
  const { configs } = parseValid(mcDoc('a', 'worker', { config: ign('3.4.0', { storage: { files: [{ path: '/etc/empty', user: { name: 'core' }, group: { id: 1000 } }] } }) }));
  const f = configs[0]!.spec.config.storage.files[0]!;
  assert.equal(f.mode, 0o644);
  assert.equal(fileText(f.contents.source), '');
  assert.deepEqual(f.user, { name: 'core' });
  assert.deepEqual(f.group, { id: 1000 });
});

test('an unknown field is named rather than ignored', () => {
  const problems = problemsOf(mcDoc('a', 'worker', { kernelArgs: ['x'], config: ign('3.4.0', { storage: { files: [{ ...fileEntry('/etc/a', 'x'), contnets: {} }] } }) }));
  assert.deepEqual(problems.map((p) => p.field).sort(), ['spec.config.storage.files[0].contnets', 'spec.kernelArgs']);
  assert.ok(problems.every((p) => p.rule === 'unknown-field'));
});
