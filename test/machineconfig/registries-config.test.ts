// registries.conf, policy.json and the search drop-in as MCO generates them. Cases are ported from
// machine-config-operator 7ff337a4 pkg/controller/container-runtime-config/helpers_test.go
// (TestUpdateRegistriesConfig, TestUpdatePolicyJSON, TestValidateRegistriesConfScopes), checking
// src/machineconfig/registries-config.ts's port of helpers.go updateRegistriesConfig /
// updatePolicyJSON and runtime-utils' EditRegistriesConfig.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  decodeRegistriesConf, encodeRegistriesConf, generateRegistriesFiles, registriesProblems, updatePolicyJson,
  type MirrorRule, type Registry, type RegistriesInput,
} from '../../src/machineconfig/registries-config.ts';
import { GenerateConfigError } from '../../src/machineconfig/errors.ts';

// The template registries.conf MCO's test encodes (V2RegistriesConf with the two search registries).
const TEMPLATE = encodeRegistriesConf({ unqualifiedSearchRegistries: ['registry.access.redhat.com', 'docker.io'], shortNameMode: '', additionalLayerStoreAuthHelper: '' });
const TEMPLATE_POLICY = JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }], transports: { 'docker-daemon': { '': [{ type: 'insecureAcceptAnything' }] } } });

type M = [location: string, pull: string, insecure?: boolean];
function reg(scope: string, o: { blocked?: boolean; insecure?: boolean; mirrors?: M[] } = {}): Registry {
  const wildcard = scope.startsWith('*.');
  return {
    prefix: wildcard ? scope : '', location: wildcard ? '' : scope, insecure: o.insecure ?? false, pullFromMirror: '',
    mirrors: (o.mirrors ?? []).map(([location, pullFromMirror, insecure]) => ({ location, pullFromMirror, insecure: insecure ?? false })),
    blocked: o.blocked ?? false, mirrorByDigestOnly: false,
  };
}
const rules = (...r: [string, string[], MirrorRule['mirrorSourcePolicy']?][]): MirrorRule[] => r.map(([source, mirrors, p]) => ({ source, mirrors, mirrorSourcePolicy: p ?? '' }));
function registriesFor(i: Partial<RegistriesInput> & { insecure?: string[]; blocked?: string[] }): Registry[] {
  const files = generateRegistriesFiles({ registriesConf: TEMPLATE, policyJson: TEMPLATE_POLICY }, {
    registrySources: { ...(i.insecure ? { insecureRegistries: i.insecure } : {}), ...(i.blocked ? { blockedRegistries: i.blocked } : {}) },
    digestMirrors: i.digestMirrors ?? [], tagMirrors: i.tagMirrors ?? [], icspMirrors: i.icspMirrors ?? [],
  }, 'Image/cluster');
  const conf = decodeRegistriesConf(files.find((f) => f.path === '/etc/containers/registries.conf')!.contents);
  assert.deepEqual(conf.unqualifiedSearchRegistries, ['registry.access.redhat.com', 'docker.io']);
  return conf.registries ?? [];
}

test('TestUpdateRegistriesConfig "insecure+blocked": blocked entries first, flags carried to sub-scopes', () => {
  assert.deepEqual(registriesFor({ insecure: ['registry.access.redhat.com', 'insecure.com', 'common.com'], blocked: ['blocked.com', 'common.com', 'docker.io'] }), [
    reg('blocked.com', { blocked: true }),
    reg('common.com', { blocked: true, insecure: true }),
    reg('docker.io', { blocked: true }),
    reg('registry.access.redhat.com', { insecure: true }),
    reg('insecure.com', { insecure: true }),
  ]);
});

const NESTED_MIRRORS = rules(
  ['insecure.com/ns-i1', ['blocked.com/ns-b1', 'other.com/ns-o1']],
  ['blocked.com/ns-b/ns2-b', ['other.com/ns-o2', 'insecure.com/ns-i2']],
  ['other.com/ns-o3', ['insecure.com/ns-i2', 'blocked.com/ns-b/ns3-b', 'foo.insecure-example.com/bar']],
);
const NESTED_WANT = [
  reg('blocked.com/ns-b/ns2-b', { blocked: true, mirrors: [['other.com/ns-o2', 'digest-only'], ['insecure.com/ns-i2', 'digest-only', true]] }),
  reg('insecure.com/ns-i1', { insecure: true, mirrors: [['blocked.com/ns-b1', 'digest-only'], ['other.com/ns-o1', 'digest-only']] }),
  reg('other.com/ns-o3', { mirrors: [['insecure.com/ns-i2', 'digest-only', true], ['blocked.com/ns-b/ns3-b', 'digest-only'], ['foo.insecure-example.com/bar', 'digest-only', true]] }),
  reg('blocked.com', { blocked: true }),
  reg('*.blocked.insecure-example.com', { blocked: true, insecure: true }),
  reg('*.blocked-example.com', { blocked: true }),
  reg('insecure.com', { insecure: true }),
  reg('*.insecure-example.com', { insecure: true }),
  reg('*.insecure.blocked-example.com', { blocked: true, insecure: true }),
];
const WILDCARDS = { insecure: ['insecure.com', '*.insecure-example.com', '*.insecure.blocked-example.com'], blocked: ['blocked.com', '*.blocked.insecure-example.com', '*.blocked-example.com'] };

test('TestUpdateRegistriesConfig "imageContentSourcePolicy": ICSP mirrors are digest-only, wildcards go to prefix', () => {
  assert.deepEqual(registriesFor({ ...WILDCARDS, icspMirrors: NESTED_MIRRORS }), NESTED_WANT);
});

test('TestUpdateRegistriesConfig "insecure+blocked prefixes with wildcard entries" (ImageDigestMirrorSet)', () => {
  assert.deepEqual(registriesFor({ ...WILDCARDS, digestMirrors: NESTED_MIRRORS }), NESTED_WANT);
});

test('TestUpdateRegistriesConfig "imageTagMirrorSet": tag-only mirrors', () => {
  assert.deepEqual(registriesFor({ tagMirrors: rules(['registry-a.com', ['mirror-tag-1.registry-a.com']], ['registry-b.com', ['mirror-tag-1.registry-b.com']]) }), [
    reg('registry-a.com', { mirrors: [['mirror-tag-1.registry-a.com', 'tag-only']] }),
    reg('registry-b.com', { mirrors: [['mirror-tag-1.registry-b.com', 'tag-only']] }),
  ]);
});

test('TestUpdateRegistriesConfig "imageDigestMirrorSet + imageTagMirrorSet + imageContentSourcePolicy merging"', () => {
  const got = registriesFor({
    digestMirrors: rules(['registry-a.com', ['mirror-digest-1.registry-a.com', 'mirror-digest-2.registry-a.com']], ['registry-b.com', ['mirror-digest-1.registry-b.com', 'mirror-digest-2.registry-b.com']]),
    tagMirrors: rules(['registry-a.com', ['mirror-tag-1.registry-a.com', 'mirror-tag-2.registry-a.com']], ['registry-b.com', ['mirror-tag-1.registry-b.com', 'mirror-tag-2.registry-b.com']]),
    icspMirrors: rules(
      ['registry-a.com', ['mirror-digest-1.registry-a.com', 'mirror-digest-2.registry-a.com', 'mirror-icsp-1.registry-a.com']],
      ['registry-b.com', ['mirror-digest-1.registry-b.com', 'mirror-digest-2.registry-b.com', 'mirror-icsp-1.registry-b.com']],
      ['registry-c.com', ['mirror-icsp-1.registry-c.com', 'mirror-icsp-2.registry-c.com']],
    ),
  });
  assert.deepEqual(got, [
    reg('registry-a.com', { mirrors: [['mirror-digest-1.registry-a.com', 'digest-only'], ['mirror-digest-2.registry-a.com', 'digest-only'], ['mirror-icsp-1.registry-a.com', 'digest-only'], ['mirror-tag-1.registry-a.com', 'tag-only'], ['mirror-tag-2.registry-a.com', 'tag-only']] }),
    reg('registry-b.com', { mirrors: [['mirror-digest-1.registry-b.com', 'digest-only'], ['mirror-digest-2.registry-b.com', 'digest-only'], ['mirror-icsp-1.registry-b.com', 'digest-only'], ['mirror-tag-1.registry-b.com', 'tag-only'], ['mirror-tag-2.registry-b.com', 'tag-only']] }),
    reg('registry-c.com', { mirrors: [['mirror-icsp-1.registry-c.com', 'digest-only'], ['mirror-icsp-2.registry-c.com', 'digest-only']] }),
  ]);
});

test('registries.conf is laid out as BurntSushi/toml encodes V2RegistriesConf; NeverContactSource blocks the source', () => {
  const files = generateRegistriesFiles({ registriesConf: TEMPLATE }, {
    registrySources: {}, digestMirrors: rules(['quay.io/ubi9/ubi-minimal', ['example.io/example/ubi-minimal'], 'NeverContactSource']), tagMirrors: [], icspMirrors: [],
  }, 'Image/cluster');
  assert.deepEqual(files.map((f) => f.path), ['/etc/containers/registries.conf']);
  assert.equal(files[0]!.contents, [
    'unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]',
    'short-name-mode = ""',
    'additional-layer-store-auth-helper = ""',
    '',
    '[[registry]]',
    '  prefix = ""',
    '  location = "quay.io/ubi9/ubi-minimal"',
    '  blocked = true',
    '',
    '  [[registry.mirror]]',
    '    location = "example.io/example/ubi-minimal"',
    '    pull-from-mirror = "digest-only"',
    '',
  ].join('\n'));
});

test('TestUpdatePolicyJSON "allowed" and "blocked": default reject or accept, docker and atomic scopes', () => {
  const allowed = JSON.parse(updatePolicyJson(TEMPLATE_POLICY, undefined, ['allow.io', '*.allowed-example.com']));
  const accept = [{ type: 'insecureAcceptAnything' }];
  assert.deepEqual(allowed, {
    default: [{ type: 'reject' }],
    transports: { atomic: { '*.allowed-example.com': accept, 'allow.io': accept }, docker: { '*.allowed-example.com': accept, 'allow.io': accept }, 'docker-daemon': { '': accept } },
  });
  const blocked = JSON.parse(updatePolicyJson(TEMPLATE_POLICY, ['block.com', '*.blocked-example.com', 'a.io/b/c/d'], undefined));
  assert.deepEqual(blocked.default, accept);
  assert.deepEqual(Object.keys(blocked.transports.docker), ['*.blocked-example.com', 'a.io/b/c/d', 'block.com']);
  // atomic takes no scope with three or more segments.
  assert.deepEqual(Object.keys(blocked.transports.atomic), ['*.blocked-example.com', 'block.com']);
});

test('allowed and blocked registries at once are refused, naming the Image config and the rule', () => {
  assert.throws(() => generateRegistriesFiles({ registriesConf: TEMPLATE, policyJson: TEMPLATE_POLICY }, {
    registrySources: { allowedRegistries: ['a.io'], blockedRegistries: ['b.io'] }, digestMirrors: [], tagMirrors: [], icspMirrors: [],
  }, 'Image/cluster'), (err: unknown) => err instanceof GenerateConfigError && err.problems[0]!.rule === 'allowed-and-blocked' && err.problems[0]!.object === 'Image/cluster');
});

test('a wildcard mirror source with an insecure or blocked scope inside it is refused, as mirrorsAdjustedForNestedScope refuses it (it wrote mirror locations with the scope\'s tail glued on)', () => {
  for (const sources of [{ insecureRegistries: ['foo.example.com'] }, { blockedRegistries: ['foo.example.com'] }]) {
    assert.throws(() => generateRegistriesFiles({ registriesConf: TEMPLATE, policyJson: TEMPLATE_POLICY }, {
      registrySources: sources, digestMirrors: rules(['*.example.com', ['mirror.local/example']]), tagMirrors: [], icspMirrors: [],
    }, 'Image/cluster'), (err: unknown) => err instanceof GenerateConfigError && err.problems[0]!.rule === 'wildcard-mirror-nested-scope' && err.problems[0]!.object === 'Image/cluster' &&
      /the mirrors of \*\.example\.com cannot be carried down to foo\.example\.com/.test(err.problems[0]!.message));
  }
  // A wildcard source alone, or with scopes elsewhere, is fine: nothing to carry down.
  assert.deepEqual(registriesFor({ insecure: ['other.io'], digestMirrors: rules(['*.example.com', ['mirror.local/example']]) }).map((r) => r.prefix || r.location), ['*.example.com', 'other.io']);
});

test('search registries go to the registries.conf.d drop-in; nothing else is generated for them', () => {
  const files = generateRegistriesFiles({}, { registrySources: { containerRuntimeSearchRegistries: ['reg1.io', 'reg2.io'] }, digestMirrors: [], tagMirrors: [], icspMirrors: [] }, 'Image/cluster');
  assert.deepEqual(files, [{ path: '/etc/containers/registries.conf.d/01-image-searchRegistries.conf', contents: 'unqualified-search-registries = ["reg1.io", "reg2.io"]\nshort-name-mode = ""\nadditional-layer-store-auth-helper = ""\n' }]);
});

test('a missing base registries.conf is a clear error naming what is missing', () => {
  assert.throws(() => generateRegistriesFiles({}, { registrySources: { insecureRegistries: ['a.io'] }, digestMirrors: [], tagMirrors: [], icspMirrors: [] }, 'Image/cluster'),
    (err: unknown) => err instanceof GenerateConfigError && err.problems[0]!.rule === 'base-config-missing' && /\/etc\/containers\/registries\.conf/.test(err.message));
});

test('TestValidateRegistriesConfScopes: bad scopes, conflicting mirrorSourcePolicy, NeverContactSource mirroring itself', () => {
  const problems = registriesProblems({ object: 'Image/cluster', sources: { insecureRegistries: ['*.a.com/foo'], blockedRegistries: ['a*.com'] } }, [
    { object: 'ImageDigestMirrorSet/one', field: 'spec.imageDigestMirrors[0]', source: 'src.io/a', mirrors: ['m.io/a'], mirrorSourcePolicy: 'NeverContactSource' },
    { object: 'ImageTagMirrorSet/two', field: 'spec.imageTagMirrors[0]', source: 'src.io/a', mirrors: ['m.io/b'], mirrorSourcePolicy: '' },
    { object: 'ImageDigestMirrorSet/three', field: 'spec.imageDigestMirrors[0]', source: 'self.io/x', mirrors: ['self.io/x'], mirrorSourcePolicy: 'NeverContactSource' },
  ]);
  assert.deepEqual(problems.map((p) => [p.object, p.rule]), [
    ['Image/cluster', 'registry-scope'], ['Image/cluster', 'registry-scope'],
    ['ImageTagMirrorSet/two', 'conflicting-mirror-source-policy'],
    ['ImageDigestMirrorSet/three', 'never-contact-source-mirror'],
  ]);
});
