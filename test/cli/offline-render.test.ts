import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { runCli } from '../helpers/run-cli.ts';

test('tests and scripts run on Node 24', () => {
  assert.equal(process.versions.node.split('.')[0], '24');
});

test('render prints a rendered MachineConfig as YAML, or JSON with -o json', () => {
  const yaml = runCli(['render', '-f', 'examples', '--pool', 'worker']);
  assert.equal(yaml.status, 0, yaml.stderr);
  const doc = parse(yaml.stdout);
  assert.equal(doc.kind, 'MachineConfig');
  assert.match(doc.metadata.name, /^rendered-worker-[0-9a-f]{32}$/);
  const json = runCli(['render', '-f', 'examples', '--pool', 'worker', '-o', 'json']);
  assert.equal(json.status, 0, json.stderr);
  assert.equal(JSON.parse(json.stdout).metadata.name, doc.metadata.name);
});

test('render reads stdin with -f -', () => {
  const r = runCli(['render', '-f', '-', '--pool', 'master'], {
    input: 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: k, labels: {machineconfiguration.openshift.io/role: master}}\nspec: {kernelArguments: [a=b]}\n',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(parse(r.stdout).spec.kernelArguments, ['a=b']);
});

test('bad input: every problem on stderr with file, object, field and rule; nothing on stdout; non-zero exit', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcctl-'));
  writeFileSync(join(dir, 'bad.yaml'), `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 10-bad, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  kernelType: turbo
  config:
    ignition: {version: 3.2.0}
    storage:
      files:
      - {path: /usr/bin/evil, mode: 04755, contents: {source: "https://example.com/x"}}
`);
  for (const cmd of [['render', '--pool', 'worker'], ['validate']]) {
    const r = runCli([...cmd, '-f', dir]);
    assert.equal(r.status, 1);
    assert.equal(r.stdout, '');
    for (const expected of [
      /bad\.yaml#0: MachineConfig\/10-bad: spec\.kernelType: .*\[kernel-type\]/,
      /bad\.yaml#0: MachineConfig\/10-bad: spec\.config\.storage\.files\[0\]\.path: .*\[path-writable-root\]/,
      /bad\.yaml#0: MachineConfig\/10-bad: spec\.config\.storage\.files\[0\]\.mode: .*\[file-mode-range\]/,
      /bad\.yaml#0: MachineConfig\/10-bad: spec\.config\.storage\.files\[0\]\.contents\.source: .*\[remote-source\]/,
    ]) assert.match(r.stderr, expected);
    assert.match(r.stderr, /4 problems/);
    assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/, 'no stack trace');
  }
});

test('an unknown pool, a missing file, and a missing -f are clear errors', () => {
  const pool = runCli(['render', '-f', 'examples', '--pool', 'gpu']);
  assert.equal(pool.status, 1);
  assert.match(pool.stderr, /MachineConfigPool\/gpu does not exist \(known pools: master, worker, infra\)/);
  const missing = runCli(['validate', '-f', 'no/such/file.yaml']);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /cannot read no\/such\/file\.yaml/);
  const usage = runCli(['render', '--pool', 'worker']);
  assert.notEqual(usage.status, 0);
  assert.match(usage.stderr, /-f, --filename/);
  assert.equal(usage.stdout, '');
});

test('validate lists what it checked', () => {
  const r = runCli(['validate', '-f', 'examples/50-infra.yaml', '-f', 'examples/infra-machineconfigpool.yaml']);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, '2 documents valid: MachineConfig/50-infra, MachineConfigPool/infra\n');
});

test('--version prints the version', () => {
  const r = runCli(['--version']);
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^\d+\.\d+\.\d+/);
});
