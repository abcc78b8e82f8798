import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatProblem, parseDocuments } from '../../src/machineconfig/index.ts';
import { fileEntry, ign, mcDoc, parseValid, problemsOf } from '../helpers/manifests.ts';

const withFiles = (...files: Record<string, unknown>[]) => mcDoc('a', 'worker', { config: ign('3.4.0', { storage: { files } }) });

test('a mode above 0777 is refused, with a hint about the YAML 1.2 trap', () => {
  const problems = problemsOf(withFiles(fileEntry('/etc/a', 'x', { mode: 644 }), fileEntry('/etc/b', 'x', { mode: 0o4755 })));
  assert.deepEqual(problems.map((p) => p.field), ['spec.config.storage.files[0].mode', 'spec.config.storage.files[1].mode']);
  assert.ok(problems.every((p) => p.rule === 'file-mode-range'));
  assert.match(problems[0]!.message, /octal 01204/);
  assert.doesNotThrow(() => parseValid(withFiles(fileEntry('/etc/a', 'x', { mode: 0o777 }))));
});

test('relative paths and dot segments are refused', () => {
  const problems = problemsOf(withFiles(fileEntry('etc/a', 'x'), fileEntry('/etc/../usr/bin/x', 'x'), fileEntry('/etc/./a', 'x'), fileEntry('/etc/a/', 'x')));
  assert.deepEqual(problems.map((p) => p.rule), ['path-absolute', 'path-dot-segment', 'path-dot-segment', 'path-empty-segment']);
});

test('paths outside /etc and /var are refused and the reason is given; /usr/local and /opt pass', () => {
  const problems = problemsOf(withFiles(fileEntry('/usr/bin/x', 'x'), fileEntry('/boot/x', 'x'), fileEntry('/etc', 'x'), fileEntry('/etcetera/x', 'x')));
  assert.equal(problems.length, 4);
  assert.ok(problems.every((p) => p.rule === 'path-writable-root'));
  assert.match(problems[0]!.message, /read-only OS image/);
  parseValid(withFiles(fileEntry('/etc/a', 'x'), fileEntry('/var/lib/a', 'x'), fileEntry('/usr/local/bin/a', 'x'), fileEntry('/opt/a/b', 'x')));
});

test('users other than core, core fields other than keys and password, and groups are refused', () => {
  const problems = problemsOf(mcDoc('a', 'worker', {
    config: ign('3.4.0', {
      passwd: {
        users: [
          { name: 'core', sshAuthorizedKeys: ['ssh-ed25519 A'], passwordHash: '$6$x', uid: 1000, groups: ['wheel'] },
          { name: 'alice' },
        ],
        groups: [{ name: 'admins' }],
      },
    }),
  }));
  assert.deepEqual(problems.map((p) => `${p.field}:${p.rule}`).sort(), [
    'spec.config.passwd.groups:passwd-groups',
    'spec.config.passwd.users[0].groups:core-user-field',
    'spec.config.passwd.users[0].uid:core-user-field',
    'spec.config.passwd.users[1].name:user-not-core',
  ]);
});

test('disks, filesystems, raid, luks and append are refused; directories and links (MCO\'s day-1 constructs) are taken; empty lists are fine', () => {
  const problems = problemsOf(mcDoc('a', 'worker', {
    config: ign('3.4.0', {
      storage: {
        disks: [{ device: '/dev/sda' }], filesystems: [{ device: '/dev/sda1' }], raid: [{ name: 'md0' }], luks: [{ name: 'x' }],
        directories: [{ path: '/etc/d' }], links: [{ path: '/etc/l', target: '/etc/a' }],
        files: [{ ...fileEntry('/etc/a', 'x'), append: [{ source: 'data:,y' }] }],
      },
    }),
  }));
  assert.deepEqual(problems.map((p) => p.rule).sort(), [
    'file-append', 'storage-disks', 'storage-filesystems', 'storage-luks', 'storage-raid',
  ]);
  parseValid(mcDoc('b', 'worker', { config: ign('3.4.0', { storage: { disks: [], directories: [], links: [], files: [] } }) }));
});

test('an unknown kernelType and an extension outside the allowlist are refused', () => {
  const problems = problemsOf(mcDoc('a', 'worker', { kernelType: 'lowlatency', extensions: ['usbguard', 'vim'] }));
  assert.deepEqual(problems.map((p) => `${p.field}:${p.rule}`), ['spec.kernelType:kernel-type', 'spec.extensions[1]:extension-allowlist']);
  assert.match(problems[0]!.message, /default, realtime, 64k-pages/);
  assert.match(problems[1]!.message, /two-node-ha, ipsec, usbguard, kerberos, kernel-devel, sandboxed-containers, sysstat/);
});

test('metadata: a name is required and must be a DNS subdomain; apiVersion is checked', () => {
  const bad = { ...mcDoc('Bad_Name', 'worker'), apiVersion: 'v1' };
  const problems = problemsOf(bad, { ...mcDoc('x', 'worker'), metadata: {} });
  assert.deepEqual(problems.map((p) => p.rule), ['api-version', 'name-format', 'required']);
});

test('every problem of a document is reported at once, each naming object, field and rule', () => {
  const problems = problemsOf(mcDoc('many', 'worker', {
    kernelType: 'x',
    extensions: ['y'],
    config: ign('3.4.0', { storage: { files: [fileEntry('/usr/x', 'x', { mode: 4095 })] }, passwd: { users: [{ name: 'bob' }] } }),
  }));
  assert.equal(problems.length, 5);
  for (const p of problems) {
    assert.equal(p.object, 'MachineConfig/many');
    assert.equal(p.source, 'test#0');
    assert.ok(p.field.startsWith('spec.'));
    assert.ok(p.rule.length > 0);
    assert.match(formatProblem(p), /^test#0: MachineConfig\/many: spec\.\S+: .+ \[[a-z0-9-]+\]$/);
  }
});

test('wrong types anywhere give problems, never an exception or a partial result', () => {
  const nasty: unknown[] = [
    null, 42, 'text', [], { spec: 'x' }, { spec: { config: [] } }, { spec: { config: { ignition: 'x' } } },
    { spec: { config: { ignition: { version: 3 } } } },
    { spec: { config: { ignition: { version: '3.4.0' }, storage: { files: [null, 1, { path: 7, mode: 'x', contents: 5 }] } } } },
    { spec: { config: { ignition: { version: '3.4.0' }, systemd: { units: [{ name: 1, dropins: 'x' }] }, passwd: { users: 'x' } } } },
    { spec: { kernelArguments: [1, null, ''], extensions: 'x', fips: 'yes', kernelType: 1, osImageURL: {} } },
    { metadata: { name: 'x', labels: { a: 1 } }, spec: {} },
  ];
  for (const [i, body] of nasty.entries()) {
    const value = body && typeof body === 'object' && !Array.isArray(body)
      ? { apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig', metadata: { name: `n${i}` }, ...(body as object) }
      : { apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig', metadata: { name: `n${i}` }, spec: body };
    const parsed = parseDocuments([{ source: `case#${i}`, value: value as Record<string, unknown> }]);
    if (i === 0) { assert.equal(parsed.problems.length, 0); continue; } // a null spec is an empty spec
    assert.ok(parsed.problems.length > 0, `case ${i} should have problems`);
    assert.equal(parsed.configs.length, 0, `case ${i} must not yield a partial config`);
  }
});

test('an object name is an RFC 1123 subdomain: "a..b", "a.-b" and "a-.b" are refused, as the API server refuses them', () => {
  for (const name of ['a..b', 'a.-b', 'a-.b', '.a', 'a.']) {
    const problems = problemsOf(mcDoc(name, 'worker', { config: ign('3.4.0', {}) }));
    assert.deepEqual(problems.map((p) => [p.field, p.rule]), [['metadata.name', 'name-format']], name);
    assert.match(problems[0]!.message, /not a valid name/);
  }
  parseValid(mcDoc('99-worker.ssh-1', 'worker', { config: ign('3.4.0', {}) }));
});
