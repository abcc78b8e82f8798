// The cases from the project's source documents (../shared/examples/README.md), checked through
// mcctl as a user would run it, against examples/ and, when present, the shared originals.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runCli, REPO_ROOT } from './helpers/run-cli.ts';
import { fileText } from './helpers/manifests.ts';

const SHARED = join(REPO_ROOT, '..', 'shared', 'examples');
const sets = [{ name: 'examples/', dir: 'examples' }];
if (existsSync(SHARED)) sets.push({ name: 'shared examples', dir: SHARED });

function render(dir: string, pool: string) {
  const r = runCli(['render', '-f', dir, '--pool', pool, '-o', 'json']);
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

for (const { name, dir } of sets) {
  describe(`cases from ${name}`, () => {
    const worker = render(dir, 'worker');
    const master = render(dir, 'master');
    const infra = render(dir, 'infra');
    const fileOf = (rendered: any, path: string) => rendered.spec.config.storage.files.find((f: any) => f.path === path);

    test('every file validates unmodified', () => {
      const r = runCli(['validate', '-f', dir]);
      assert.equal(r.status, 0, r.stderr);
    });

    test('50-examplecorp-chrony: Ignition 2.2, base64, mode 0644 -> /etc/chrony.conf with three server lines', () => {
      const f = fileOf(worker, '/etc/chrony.conf');
      assert.equal(f.mode, 0o644);
      const lines = fileText(f.contents.source).trimEnd().split('\n');
      assert.equal(lines.length, 3);
      for (const line of lines) assert.match(line, /^server \S+ maxdelay 0\.4 offline$/);
    });

    test('99-master-kargs-hugepage: kargs appended in order on the master pool only', () => {
      assert.deepEqual(master.spec.kernelArguments, ['default_hugepagesz=1G', 'hugepagesz=1G', 'hugepages=32']);
      assert.ok(!worker.spec.kernelArguments.includes('hugepages=32'));
    });

    test('05-worker-kernelarg-selinuxoff: Ignition 3.2 with no content plus karg selinux=0', () => {
      assert.ok(worker.spec.kernelArguments.includes('selinux=0'));
    });

    test('99-worker-realtime: the worker pool renders kernelType realtime', () => {
      assert.equal(worker.spec.kernelType, 'realtime');
      assert.equal(master.spec.kernelType, 'default');
    });

    test('infra pool: every worker config plus /etc/testinfra ("test")', () => {
      for (const source of worker.metadata.annotations['mcplane.io/source-configs'].split(',')) {
        assert.ok(infra.metadata.annotations['mcplane.io/source-configs'].split(',').includes(source), source);
      }
      assert.equal(fileText(fileOf(infra, '/etc/testinfra').contents.source), 'test');
      assert.equal(fileOf(worker, '/etc/testinfra'), undefined);
      for (const f of worker.spec.config.storage.files) assert.deepEqual(fileOf(infra, f.path), f);
    });

    test('99-kubeinit-extra-config-worker: empty sections accepted, file at /usr/local/bin with mode 0755', () => {
      const f = fileOf(worker, '/usr/local/bin/kubeinit_kubevirt_extra_config_script');
      assert.equal(f.mode, 0o755);
      assert.match(fileText(f.contents.source), /^#!\/usr\/bin\/bash/);
    });
  });
}

test('a node labelled worker and infra belongs to infra only', async () => {
  const { primaryPoolForNode, defaultPools, parseManifests } = await import('../src/machineconfig/index.ts');
  const { readFileSync } = await import('node:fs');
  const { pools } = parseManifests(readFileSync(join(REPO_ROOT, 'examples/infra-machineconfigpool.yaml'), 'utf8'));
  const all = [...defaultPools(), ...pools];
  const labels = { 'node-role.kubernetes.io/worker': '', 'node-role.kubernetes.io/infra': '' };
  assert.equal(primaryPoolForNode('n1', labels, all)?.metadata.name, 'infra');
});
