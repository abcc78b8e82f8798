import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { defaultPools, renderPool } from '../../src/machineconfig/index.ts';
import { fileEntry, ign, mcDoc, parseValid } from '../helpers/manifests.ts';

const worker = defaultPools().find((p) => p.metadata.name === 'worker')!;
const docs = () => [
  mcDoc('10', 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry('/etc/a', 'A'), fileEntry('/etc/b', 'B')] } }), kernelArguments: ['x'] }),
  mcDoc('20', 'worker', { extensions: ['usbguard'] }),
];

test('equal inputs give the same name, whatever the input order or key order', () => {
  const a = renderPool(worker, parseValid(...docs()).configs).name;
  const reversed = docs().reverse().map((d) => reverseKeys(d) as Record<string, unknown>);
  const b = renderPool(worker, parseValid(...reversed).configs).name;
  assert.equal(a, b);
});

test('any change of content gives a new name', () => {
  const base = renderPool(worker, parseValid(...docs()).configs).name;
  const variants = [
    mcDoc('30', 'worker', { kernelArguments: ['y'] }),
    mcDoc('30', 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry('/etc/a', 'A2')] } }) }),
    mcDoc('30', 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry('/etc/a', 'A', { mode: 0o600 })] } }) }),
    mcDoc('30', 'worker', { fips: true }),
  ];
  const names = new Set([base]);
  for (const v of variants) names.add(renderPool(worker, parseValid(...docs(), v).configs).name);
  assert.equal(names.size, variants.length + 1);
});

test('the name is the same in another process', () => {
  const here = renderPool(worker, parseValid(...docs()).configs).name;
  const script = `
    import { defaultPools, renderPool } from './src/machineconfig/index.ts';
    import { parseValid } from './test/helpers/manifests.ts';
    const docs = ${JSON.stringify(docs())};
    process.stdout.write(renderPool(defaultPools()[1], parseValid(...docs).configs).name);`;
  const there = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(there, here);
});

function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reverseKeys(v)]));
  }
  return value;
}

test('the rendered spec serializes canonically with the native serializer (what the hash relies on)', async () => {
  const { canonicalJson, renderedConfigJson, renderedConfigManifest } = await import('../../src/machineconfig/index.ts');
  const rich = parseValid(
    mcDoc('10', 'worker', {
      config: ign('3.4.0', {
        passwd: { users: [{ sshAuthorizedKeys: ['k'], passwordHash: 'h', name: 'core' }] },
        storage: { files: [{ user: { name: 'core', id: 1 }, group: { name: 'g' }, contents: { source: 'data:,x' }, mode: 0o600, path: '/etc/z' }] },
        systemd: { units: [{ mask: false, name: 'a.service', dropins: [{ contents: 'c', name: 'b.conf' }], enabled: true, contents: 'u' }] },
      }),
      osImageURL: 'o', kernelType: 'realtime', kernelArguments: ['k'], fips: true, extensions: ['ipsec'], baseOSExtensionsContainerImage: 'b',
    }),
    mcDoc('20', 'worker', { config: ign('3.4.0', { systemd: { units: [{ name: 'a.service', mask: true, dropins: [{ name: 'a.conf' }] }] } }) }),
  );
  const r = renderPool(worker, rich.configs);
  assert.equal(r.specJson, canonicalJson(r.spec));
  assert.deepEqual(JSON.parse(renderedConfigJson(r)), JSON.parse(JSON.stringify(renderedConfigManifest(r))));
});
