// The cluster Image config's registrySources, and the mirror sets' lists, as their CRDs admit them (openshift/api
// config/v1 RegistrySources at machine-config-operator 7ff337a4): the API server refuses these
// before MCO reads them, so mcplane refuses them at Apply, naming the entry and the rule.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseImageConfig, parseMirrorSet } from '../../src/machineconfig/image-config.ts';
import { decodeRegistriesConf, generateRegistriesFiles } from '../../src/machineconfig/registries-config.ts';
import { ProblemCollector } from '../../src/machineconfig/problem-collector.ts';

function parse(registrySources: Record<string, unknown>) {
  const c = new ProblemCollector('Image/cluster');
  const image = parseImageConfig({ apiVersion: 'config.openshift.io/v1', kind: 'Image', metadata: { name: 'cluster' }, spec: { registrySources } }, c);
  return { image, problems: c.problems.map((p) => [p.field, p.rule]) };
}

test('each registry is hostname[:port][/path] or *.hostname, 1 to 256 characters, without tag or digest', () => {
  assert.deepEqual(parse({ insecureRegistries: ['quay.io', 'registry.local:5000/team/app', '*.example.com'], blockedRegistries: ['docker.io'] }).problems, []);
  const bad = parse({ blockedRegistries: ['quay.io/app:latest', 'quay.io/app@sha256:0123', '', `a.io/${'x'.repeat(256)}`, 'Quay.io/Team', 'https://quay.io'] });
  assert.deepEqual(bad.problems, [
    ['spec.registrySources.blockedRegistries[0]', 'registry-scope-format'],
    ['spec.registrySources.blockedRegistries[1]', 'registry-scope-format'],
    ['spec.registrySources.blockedRegistries[2]', 'registry-scope-length'],
    ['spec.registrySources.blockedRegistries[3]', 'registry-scope-length'],
    ['spec.registrySources.blockedRegistries[4]', 'registry-scope-format'],
    ['spec.registrySources.blockedRegistries[5]', 'registry-scope-format'],
  ]);
  assert.equal(bad.image, undefined, 'nothing of a refused object is taken');
});

test('at most 1,024 registries a list; blocked and allowed may not both be there, an empty list counts', () => {
  assert.deepEqual(parse({ allowedRegistries: Array.from({ length: 1025 }, (_, i) => `r${i}.io`) }).problems, [['spec.registrySources.allowedRegistries', 'registry-list-size']]);
  assert.deepEqual(parse({ allowedRegistries: ['quay.io'], blockedRegistries: [] }).problems, [['spec.registrySources', 'allowed-and-blocked']]);
  assert.deepEqual(parse({ allowedRegistries: ['quay.io'] }).problems, []);
});

test('containerRuntimeSearchRegistries: at least one when set, each once', () => {
  assert.deepEqual(parse({ containerRuntimeSearchRegistries: [] }).problems, [['spec.registrySources.containerRuntimeSearchRegistries', 'search-registries']]);
  assert.deepEqual(parse({ containerRuntimeSearchRegistries: ['quay.io', 'docker.io', 'quay.io'] }).problems, [['spec.registrySources.containerRuntimeSearchRegistries[2]', 'search-registries']]);
  assert.deepEqual(parse({ containerRuntimeSearchRegistries: ['quay.io', 'docker.io'] }).problems, []);
});

test('a mirror listed twice: refused in an ImageDigestMirrorSet (a set in its CRD), taken in an ImageContentSourcePolicy (a plain list, as MCO takes it)', () => {
  const mirrors = ['mirror.local/app', 'mirror.local/app'];
  const idms = new ProblemCollector('ImageDigestMirrorSet/m');
  parseMirrorSet({ apiVersion: 'config.openshift.io/v1', kind: 'ImageDigestMirrorSet', metadata: { name: 'm' }, spec: { imageDigestMirrors: [{ source: 'quay.io/app', mirrors }] } }, idms);
  assert.deepEqual(idms.problems.map((p) => [p.field, p.rule]), [['spec.imageDigestMirrors[0].mirrors', 'duplicate-entry']]);
  const c = new ProblemCollector('ImageContentSourcePolicy/m');
  const icsp = parseMirrorSet({ apiVersion: 'operator.openshift.io/v1alpha1', kind: 'ImageContentSourcePolicy', metadata: { name: 'm' }, spec: { repositoryDigestMirrors: [{ source: 'quay.io/app', mirrors }] } }, c);
  assert.deepEqual(c.problems, []);
  const files = generateRegistriesFiles({ registriesConf: 'unqualified-search-registries = ["docker.io"]\n' }, { registrySources: {}, digestMirrors: [], tagMirrors: [], icspMirrors: icsp!.rules }, 'Image/cluster');
  const conf = decodeRegistriesConf(files[0]!.contents);
  assert.deepEqual(conf.registries?.map((r) => [r.location, r.mirrors.map((m) => m.location)]), [['quay.io/app', ['mirror.local/app']]], 'the mirror once, as the topological merge lists it');
});
