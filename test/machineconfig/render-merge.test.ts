import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultPools, renderPool, RenderError } from '../../src/machineconfig/index.ts';
import { fileEntry, fileText, ign, mcDoc, parseValid, poolDoc } from '../helpers/manifests.ts';

const worker = defaultPools().find((p) => p.metadata.name === 'worker')!;
const files = (...f: Record<string, unknown>[]) => ({ config: ign('3.4.0', { storage: { files: f } }) });
const units = (...u: Record<string, unknown>[]) => ({ config: ign('3.4.0', { systemd: { units: u } }) });
const keys = (...k: string[]) => ({ config: ign('3.4.0', { passwd: { users: [{ name: 'core', sshAuthorizedKeys: k }] } }) });

test('configs merge in name order: for the same path the later name wins', () => {
  const { configs } = parseValid(mcDoc('99-b', 'worker', files(fileEntry('/etc/x', 'from 99'))), mcDoc('10-a', 'worker', files(fileEntry('/etc/x', 'from 10'))));
  const r = renderPool(worker, configs);
  assert.deepEqual(r.sources, ['10-a', '99-b']);
  assert.equal(fileText(r.spec.config.storage.files[0]!.contents.source), 'from 99');
});

test('many configs sharing paths: each path once, in path order, with the last config\'s content', () => {
  // Twelve configs writing overlapping paths out of order: the merge must keep, for each path,
  // what the config latest in name order wrote, whatever the order of paths within each config.
  const docs = Array.from({ length: 12 }, (_, i) => mcDoc(`${String(i).padStart(2, '0')}-c`, 'worker',
    files(...[7, 3, 11, 0, 5].map((p) => (p + i) % 9).map((p) => fileEntry(`/etc/p${p}`, `p${p} from ${i}`)))));
  const r = renderPool(worker, parseValid(...docs.reverse()).configs);
  const expected = new Map<string, string>();
  for (let i = 0; i < 12; i++) for (const p of [7, 3, 11, 0, 5].map((q) => (q + i) % 9)) expected.set(`/etc/p${p}`, `p${p} from ${i}`);
  const got = r.spec.config.storage.files.map((f) => [f.path, fileText(f.contents.source)]);
  assert.deepEqual(got, [...expected].sort(([a], [b]) => (a < b ? -1 : 1)));
});

test('only configs the pool selects are merged', () => {
  const { configs } = parseValid(mcDoc('a', 'worker', { kernelArguments: ['w'] }), mcDoc('b', 'master', { kernelArguments: ['m'] }));
  assert.deepEqual(renderPool(worker, configs).spec.kernelArguments, ['w']);
});

test('a custom pool merges worker configs first, then its own, each group by name', () => {
  const { configs, pools } = parseValid(
    poolDoc('infra', {
      machineConfigSelector: { matchExpressions: [{ key: 'machineconfiguration.openshift.io/role', operator: 'In', values: ['worker', 'infra'] }] },
      nodeSelector: { matchLabels: { 'node-role.kubernetes.io/infra': '' } },
    }),
    mcDoc('10-infra', 'infra', files(fileEntry('/etc/x', 'infra'))),
    mcDoc('50-worker', 'worker', files(fileEntry('/etc/x', 'worker'))),
  );
  const r = renderPool(pools[0]!, configs);
  assert.deepEqual(r.sources, ['50-worker', '10-infra']);
  assert.equal(fileText(r.spec.config.storage.files[0]!.contents.source), 'infra');
});

test('units keyed by name: later fields win, dropins keyed by name within the unit', () => {
  const { configs } = parseValid(
    mcDoc('10', 'worker', units({ name: 'a.service', contents: 'v1', enabled: true, dropins: [{ name: '1.conf', contents: 'd1' }, { name: '2.conf', contents: 'd2' }] })),
    mcDoc('20', 'worker', units({ name: 'a.service', contents: 'v2', dropins: [{ name: '2.conf', contents: 'd2-new' }, { name: '3.conf', contents: 'd3' }] })),
  );
  const unit = renderPool(worker, configs).spec.config.systemd.units[0]!;
  assert.equal(unit.contents, 'v2');
  assert.equal(unit.enabled, true);
  assert.deepEqual(unit.dropins, [{ name: '1.conf', contents: 'd1' }, { name: '2.conf', contents: 'd2-new' }, { name: '3.conf', contents: 'd3' }]);
});

test('SSH keys of core are unioned and deduplicated; the last password hash wins', () => {
  const { configs } = parseValid(mcDoc('10', 'worker', keys('k1', 'k2')), mcDoc('20', 'worker', keys('k2', 'k3')),
    mcDoc('30', 'worker', { config: ign('3.4.0', { passwd: { users: [{ name: 'core', passwordHash: '$6$h' }] } }) }));
  assert.deepEqual(renderPool(worker, configs).spec.config.passwd.users, [{ name: 'core', sshAuthorizedKeys: ['k1', 'k2', 'k3'], passwordHash: '$6$h' }]);
});

test('kernelArguments concatenate in order; fips if any; kernelType last non-default; osImageURL last set; extensions unioned', () => {
  const { configs } = parseValid(
    mcDoc('10', 'worker', { kernelArguments: ['a=1', 'b'], kernelType: 'realtime', fips: true, osImageURL: 'quay.io/os@sha256:1', extensions: ['usbguard'] }),
    mcDoc('20', 'worker', { kernelArguments: ['a=1', 'c'], kernelType: 'default', osImageURL: '', extensions: ['sysstat', 'usbguard'] }),
    mcDoc('30', 'worker', { kernelType: '64k-pages', fips: false, osImageURL: 'quay.io/os@sha256:3' }),
  );
  const spec = renderPool(worker, configs).spec;
  assert.deepEqual(spec.kernelArguments, ['a=1', 'b', 'a=1', 'c']);
  assert.equal(spec.fips, true);
  assert.equal(spec.kernelType, '64k-pages');
  assert.equal(spec.osImageURL, 'quay.io/os@sha256:3');
  assert.deepEqual(spec.extensions, ['sysstat', 'usbguard']);
});

test('an empty pool renders an empty config', () => {
  const r = renderPool(worker, []);
  assert.deepEqual(r.spec.config.storage.files, []);
  assert.equal(r.spec.kernelType, 'default');
  assert.match(r.name, /^rendered-worker-[0-9a-f]{32}$/);
});

test('a rendered config above 1.5 MiB is refused, naming the largest contributors', () => {
  const big = 'x'.repeat(600 * 1024);
  const { configs } = parseValid(
    mcDoc('10-big', 'worker', files(fileEntry('/etc/a', big))),
    mcDoc('20-big', 'worker', files(fileEntry('/etc/b', big))),
    mcDoc('30-big', 'worker', files(fileEntry('/etc/c', big))),
  );
  assert.throws(() => renderPool(worker, configs), (err: unknown) => {
    assert.ok(err instanceof RenderError);
    assert.equal(err.code, 'MCPLANE_RENDER_FAILED');
    assert.equal(err.problems[0]!.rule, 'rendered-size');
    assert.match(err.problems[0]!.message, /above the 1\.5 MiB limit.*10-big/);
    return true;
  });
  // Two of them fit.
  assert.doesNotThrow(() => renderPool(worker, configs.slice(0, 1)));
});
