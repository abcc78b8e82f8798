// ClusterImagePolicy made into policy.json requirements and sigstore-registries.yaml as MCO makes
// them. Cases are ported from machine-config-operator 7ff337a4
// pkg/controller/container-runtime-config/helpers_test.go (clusterImagePolicyTestCRs,
// TestGetValidScopePolicies, TestGenerateSigstoreRegistriesConfig, TestGeneratePolicyJSON,
// TestValidateClusterImagePolicyWithAllowedBlockedRegistries; the namespaced ImagePolicy cases
// are left out, as mcplane does not take that kind); the CRD's rules from openshift/api config/v1.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { clusterScopePolicies, parseClusterImagePolicy, sigstoreRegistriesYaml, sigstoreRequirement, type ClusterImagePolicy, type SigstorePolicy } from '../../src/machineconfig/image-policy.ts';
import { GenerateConfigError } from '../../src/machineconfig/errors.ts';
import { ProblemCollector } from '../../src/machineconfig/problem-collector.ts';
import { decodeRegistriesConf, generateRegistriesFiles, scopePolicyConflict, updatePolicyJson, type MirrorRule } from '../../src/machineconfig/registries-config.ts';

const TEST_KEY = 'dGVzdC1rZXktZGF0YQ==';
const TEST_REKOR = 'dGVzdC1yZWtvci1rZXktZGF0YQ==';
const TEST_FULCIO = 'dGVzdC1jYS1kYXRhLWRhdGE=';
const TEST_CERTS = 'LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJBVEE9Ci0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0=';
const remap = { matchPolicy: 'RemapIdentity' as const, remapIdentity: { prefix: 'test-remap-prefix', signedPrefix: 'test-remap-signed-prefix' } };

/** clusterImagePolicyTestCRs (their key data is not PEM: MCO's unit tests bypass the CRD). */
const cip = (name: string, scopes: string[], policy: SigstorePolicy): ClusterImagePolicy => ({ apiVersion: 'config.openshift.io/v1', kind: 'ClusterImagePolicy', metadata: { name }, spec: { scopes, policy } });
const CR0 = cip('test-cr0', ['test0.com'], { rootOfTrust: { policyType: 'FulcioCAWithRekor', fulcioCAWithRekor: { fulcioCAData: TEST_FULCIO, rekorKeyData: TEST_REKOR, fulcioSubject: { oidcIssuer: 'https://OIDC.example.com', signedEmail: 'test-user@example.com' } } }, signedIdentity: remap });
const CR1 = cip('test-cr1', ['test0.com', 'test1.com'], { rootOfTrust: { policyType: 'PublicKey', publicKey: { keyData: TEST_KEY, rekorKeyData: TEST_REKOR } }, signedIdentity: remap });
const CR2 = cip('test-cr2', ['a.com/a1/a2', `a.com/a1/a2@sha256:${'0'.repeat(64)}`, '*.example.com', 'policy.scope', 'foo.example.com/ns/repo'], { rootOfTrust: { policyType: 'PublicKey', publicKey: { keyData: TEST_KEY, rekorKeyData: TEST_REKOR } } });
const CR3 = cip('test-cr3', ['test3.com/ns/repo'], { rootOfTrust: { policyType: 'PKI', pki: { caRootsData: TEST_CERTS, caIntermediatesData: TEST_CERTS, pkiCertificateSubject: { email: 'test-user@example.com', hostname: 'my-host.example.com' } } } });

test('TestGetValidScopePolicies "cluster CRs contain the same scope": requirements gather by scope, in the policies\' order', () => {
  const policies = clusterScopePolicies([CR0, CR1]);
  assert.deepEqual([...policies.keys()], ['test0.com', 'test1.com']);
  assert.deepEqual(policies.get('test0.com'), [sigstoreRequirement(CR0.spec.policy), sigstoreRequirement(CR1.spec.policy)]);
  assert.deepEqual(policies.get('test1.com'), [sigstoreRequirement(CR1.spec.policy)]);
  assert.deepEqual(sigstoreRequirement(CR1.spec.policy), { type: 'sigstoreSigned', keyData: TEST_KEY, rekorPublicKeyData: TEST_REKOR, signedIdentity: { type: 'remapIdentity', prefix: 'test-remap-prefix', signedPrefix: 'test-remap-signed-prefix' } });
});

test('TestGeneratePolicyJSON: the sigstoreSigned requirements in policy.json, docker and atomic, fields in containers/image\'s order', () => {
  const template = JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }], transports: { 'docker-daemon': { '': [{ type: 'insecureAcceptAnything' }] } } });
  const fulcio = {
    type: 'sigstoreSigned',
    fulcio: { caData: TEST_FULCIO, oidcIssuer: 'https://OIDC.example.com', subjectEmail: 'test-user@example.com' },
    rekorPublicKeyData: TEST_REKOR,
    signedIdentity: { type: 'remapIdentity', prefix: 'test-remap-prefix', signedPrefix: 'test-remap-signed-prefix' },
  };
  const pki = {
    type: 'sigstoreSigned',
    pki: { caRootsData: TEST_CERTS, caIntermediatesData: TEST_CERTS, subjectEmail: 'test-user@example.com', subjectHostname: 'my-host.example.com' },
    signedIdentity: { type: 'matchRepoDigestOrExact' },
  };
  const expected = {
    default: [{ type: 'insecureAcceptAnything' }],
    transports: {
      atomic: { 'test0.com': [fulcio], 'test3.com/ns/repo': [pki] },
      docker: { 'test0.com': [fulcio], 'test3.com/ns/repo': [pki] },
      'docker-daemon': { '': [{ type: 'insecureAcceptAnything' }] },
    },
  };
  const text = updatePolicyJson(template, [], [], clusterScopePolicies([CR0, CR3]));
  assert.equal(text, JSON.stringify(expected, null, 2), 'key for key and in order, as json.MarshalIndent writes it');
});

test('policy.json: an allowed registry that is a policy\'s scope gets the policy, not insecureAcceptAnything; blocked ones stay rejected', () => {
  const template = JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }], transports: {} });
  const allowed = JSON.parse(updatePolicyJson(template, undefined, ['test0.com', 'other.io'], clusterScopePolicies([CR0])));
  assert.deepEqual(allowed.default, [{ type: 'reject' }]);
  assert.deepEqual(allowed.transports.docker['test0.com'], [sigstoreRequirement(CR0.spec.policy)]);
  assert.deepEqual(allowed.transports.docker['other.io'], [{ type: 'insecureAcceptAnything' }]);
});

test('policy.json escapes &, < and > as Go\'s json.Marshal does (an OIDC issuer with a query string)', () => {
  const policy = cip('q', ['quay.io/team'], { rootOfTrust: { policyType: 'FulcioCAWithRekor', fulcioCAWithRekor: { fulcioCAData: TEST_FULCIO, rekorKeyData: TEST_REKOR, fulcioSubject: { oidcIssuer: 'https://oidc.example.com/?a=1&b=<2>', signedEmail: 'me@example.com' } } } });
  const text = updatePolicyJson('{"default":[{"type":"insecureAcceptAnything"}]}', undefined, undefined, clusterScopePolicies([policy]));
  assert.match(text, /"oidcIssuer": "https:\/\/oidc\.example\.com\/\?a=1\\u0026b=\\u003c2\\u003e"/);
  assert.equal(JSON.parse(text).transports.docker['quay.io/team'][0].fulcio.oidcIssuer, 'https://oidc.example.com/?a=1&b=<2>');
});

test('TestValidateClusterImagePolicyWithAllowedBlockedRegistries: a scope inside allowed, outside blocked', () => {
  assert.equal(scopePolicyConflict(['example.com', 'test.registries.com'], [], []), undefined);
  assert.equal(scopePolicyConflict(['allowed.io/namespace1/policysigned', 'example.com'], ['example.com', 'allowed.io/namespace1'], []), undefined);
  assert.equal(scopePolicyConflict(['allowed.io/policysigned'], ['allowed.io/namespace1/namespace2'], []), 'clusterimagePolicy configured for the scope allowed.io/policysigned is not nested inside allowedRegistries');
  assert.equal(scopePolicyConflict(['allowed.io/policysigned', 'blocked.io'], [], ['blocked.io/namespace1/namespace2', 'blocked.example.com/namespace1/namespace2']), undefined);
  assert.match(scopePolicyConflict(['blocker-reg.com/namespace1/policysigned', 'blocked.io'], [], ['blocked.io', 'blocker-reg.com/namespace1'])!, /is nested inside blockedRegistries/);
});

const TEMPLATE_REGISTRIES = "unqualified-search-registries = ['registry.access.redhat.com', 'docker.io']\n";
const rules = (...r: [string, string[]][]): MirrorRule[] => r.map(([source, mirrors]) => ({ source, mirrors, mirrorSourcePolicy: '' }));

/** updateRegistriesConfig(template, nil, nil, icsp, idms, itms), then generateSigstoreRegistriesdConfig's scopes. */
function sigstoreScopes(m: { digest?: MirrorRule[]; tag?: MirrorRule[]; icsp?: MirrorRule[] }): string[] {
  const files = generateRegistriesFiles({ registriesConf: TEMPLATE_REGISTRIES }, { registrySources: {}, digestMirrors: m.digest ?? [], tagMirrors: m.tag ?? [], icspMirrors: m.icsp ?? [] }, 'Image/cluster');
  const registries = files.find((f) => f.path === '/etc/containers/registries.conf');
  const yaml = sigstoreRegistriesYaml([...clusterScopePolicies([CR2]).keys()], registries ? decodeRegistriesConf(registries.contents) : undefined)!;
  return Object.keys(parseYaml(yaml).docker).sort();
}

test('TestGenerateSigstoreRegistriesConfig: the scopes, and every mirror their images are pulled from', () => {
  const scopes = ['*.example.com', 'a.com/a1/a2', `a.com/a1/a2@sha256:${'0'.repeat(64)}`, 'foo.example.com/ns/repo', 'policy.scope'];
  const cases: { name: string; mirrors: Parameters<typeof sigstoreScopes>[0]; expected: string[] }[] = [
    { name: 'cip objects exist, icsp/idms/itms are empty', mirrors: {}, expected: scopes },
    {
      name: 'cip has no revelant registries mirrors',
      mirrors: { icsp: rules(['x.com/x1/x2', ['x-x1-x2.mirror/x1/x2']]), digest: rules(['y.com/y1/y2', ['y-y1-y2.mirror/y1/y2']]), tag: rules(['z.com/z1/z2', ['z-z1-z2.mirror/z1/z2']]) },
      expected: scopes,
    },
    {
      name: 'cip scope a.com/a1/a2 is super scope of registries sources',
      mirrors: { digest: rules(['a.com/a1/a2', ['a-a1-a2.mirror/a1/a2']], ['a.com/a1/a2/a3', ['a-a1-a2-a3.mirror/m1/m2/m3']], ['a.com/a1/a2/a3-1', ['a-a1-a2-a3-1.mirror/m1/m2/m3']], ['x.com/x1/x2', ['x-x1-x2.mirror/m1/m2']]) },
      expected: [...scopes, 'a-a1-a2-a3-1.mirror/m1/m2/m3', 'a-a1-a2-a3.mirror/m1/m2/m3', 'a-a1-a2.mirror/a1/a2', 'a.com/a1/a2/a3', 'a.com/a1/a2/a3-1'],
    },
    {
      name: 'cip scope a.com/a1/a2 nested in registries sources',
      mirrors: { digest: rules(['a.com', ['a.mirror']], ['a.com/a1', ['a-a1.mirror/a1']], ['x.com/x1/x2', ['x-x1-x2.mirror/x1/x2']]) },
      expected: [...scopes, 'a-a1.mirror/a1/a2'],
    },
    {
      name: 'cip wildcard scope *.example.com is the mirror source',
      mirrors: { digest: rules(['*.example.com', ['our.mirror/example']]) },
      expected: [...scopes, 'our.mirror/example/ns/repo', 'our.mirror/example'],
    },
    {
      name: 'cip scope *.example.com and mirror source have wildcard matching',
      mirrors: { digest: rules(['a.example.com', ['a-example.mirror']], ['*.x.example.com', ['matched.example.mirror', 'star-x.example.mirror']], ['*.scope', ['start-scope.mirror']], ['x/x1/x2', ['x-x1-x2.mirror/x1/x2']]) },
      expected: [...scopes, 'a-example.mirror', 'a.example.com', 'star-x.example.mirror', 'matched.example.mirror', 'start-scope.mirror'],
    },
  ];
  for (const c of cases) assert.deepEqual(sigstoreScopes(c.mirrors), [...c.expected].sort(), c.name);
});

test('sigstore-registries.yaml is written as ghodss/yaml writes it: sorted, a wildcard scope single-quoted', () => {
  assert.equal(sigstoreRegistriesYaml(['quay.io/team', '*.example.com'], undefined),
    "docker:\n  '*.example.com':\n    use-sigstore-attachments: true\n  quay.io/team:\n    use-sigstore-attachments: true\n");
  assert.equal(sigstoreRegistriesYaml([], undefined), undefined, 'no scope, no file');
});

test('FindRegistry as sysregistriesv2 loads the file: one registry per prefix, sorted, the first of two equally long prefixes wins', () => {
  const conf = decodeRegistriesConf([
    'unqualified-search-registries = []',
    '[[registry]]\n  location = "a.example.com"\n  [[registry.mirror]]\n    location = "a.mirror/y"',
    '[[registry]]\n  prefix = "*.example.com"\n  location = ""\n  [[registry.mirror]]\n    location = "wild.mirror/x"',
  ].join('\n'));
  // "*.example.com" sorts before "a.example.com" and is as long, so it is the registry found.
  assert.equal(sigstoreRegistriesYaml(['a.example.com/app'], conf), 'docker:\n  a.example.com/app:\n    use-sigstore-attachments: true\n  wild.mirror/x/app:\n    use-sigstore-attachments: true\n');
});

test('a mirror that makes no canonical reference fails the file, naming the policy of the scope (MCO\'s generation fails there too)', () => {
  const conf = decodeRegistriesConf('unqualified-search-registries = []\n[[registry]]\n  location = "quay.io/team"\n  [[registry.mirror]]\n    location = "mirror/team"\n');
  assert.throws(() => sigstoreRegistriesYaml(['quay.io/team'], conf, (scope) => `ClusterImagePolicy/for-${scope.split('/')[1]}`), (err: unknown) =>
    err instanceof GenerateConfigError && err.problems[0]!.object === 'ClusterImagePolicy/for-team' && err.problems[0]!.rule === 'image-policy-mirrors' &&
    /error adding clusterimagepolicy scope quay\.io\/team relevant mirrors: mirror\/team@sha256:a+: repository name must be canonical/.test(err.problems[0]!.message));
});

// ---- the CRD's rules ---------------------------------------------------------------------------

const pem = (kind: string): string => Buffer.from(`-----BEGIN ${kind}-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE${'A'.repeat(40)}\n-----END ${kind}-----\n`).toString('base64');
function parse(spec: Record<string, unknown>) {
  const c = new ProblemCollector('ClusterImagePolicy/p');
  const policy = parseClusterImagePolicy({ apiVersion: 'config.openshift.io/v1', kind: 'ClusterImagePolicy', metadata: { name: 'p' }, spec }, c);
  return { policy, problems: c.problems.map((p) => [p.field, p.rule]) };
}

test('a ClusterImagePolicy as the CRD admits it: scopes, the root of trust\'s union, PEM data, the signed identity', () => {
  const good = parse({ scopes: ['quay.io/team', '*.example.com', 'localhost:5000/app', `reg.io/app@sha256:${'a'.repeat(64)}`], policy: { rootOfTrust: { policyType: 'PublicKey', publicKey: { keyData: pem('PUBLIC KEY') } }, signedIdentity: { matchPolicy: 'ExactRepository', exactRepository: { repository: 'quay.io/team/app' } } } });
  assert.deepEqual(good.problems, []);
  assert.deepEqual(sigstoreRequirement(good.policy!.spec.policy), { type: 'sigstoreSigned', keyData: pem('PUBLIC KEY'), signedIdentity: { type: 'exactRepository', dockerRepository: 'quay.io/team/app' } });

  assert.deepEqual(parse({ scopes: ['quay', 'a*.example.com', 'quay.io/Team', 'quay.io/team', 'quay.io/team'], policy: { rootOfTrust: { policyType: 'PublicKey', publicKey: { keyData: pem('PUBLIC KEY') } } } }).problems, [
    ['spec.scopes[0]', 'image-scope'], ['spec.scopes[1]', 'image-scope'], ['spec.scopes[2]', 'image-scope'], ['spec.scopes[4]', 'duplicate-entry'],
  ]);
  assert.deepEqual(parse({ scopes: ['quay.io'], policy: { rootOfTrust: { policyType: 'PublicKey', fulcioCAWithRekor: {} } } }).problems, [
    ['spec.policy.rootOfTrust.publicKey', 'root-of-trust'], ['spec.policy.rootOfTrust.fulcioCAWithRekor', 'root-of-trust'],
  ]);
  assert.deepEqual(parse({ scopes: ['quay.io'], policy: { rootOfTrust: { policyType: 'PublicKey', publicKey: { keyData: pem('CERTIFICATE') } } } }).problems, [['spec.policy.rootOfTrust.publicKey.keyData', 'pem-data']]);
  assert.deepEqual(parse({ scopes: ['quay.io'], policy: { rootOfTrust: { policyType: 'PublicKey', publicKey: { keyData: 'not base64!' } } } }).problems, [['spec.policy.rootOfTrust.publicKey.keyData', 'base64']]);
  assert.deepEqual(parse({ scopes: ['quay.io'], policy: { rootOfTrust: { policyType: 'FulcioCAWithRekor', fulcioCAWithRekor: { fulcioCAData: pem('CERTIFICATE'), rekorKeyData: pem('PUBLIC KEY'), fulcioSubject: { oidcIssuer: 'not a url', signedEmail: 'nobody' } } } } }).problems, [
    ['spec.policy.rootOfTrust.fulcioCAWithRekor.fulcioSubject.oidcIssuer', 'oidc-issuer'], ['spec.policy.rootOfTrust.fulcioCAWithRekor.fulcioSubject.signedEmail', 'email'],
  ]);
  // CEL's isURL is url.ParseRequestURI: an absolute path is a URL too.
  assert.deepEqual(parse({ scopes: ['quay.io'], policy: { rootOfTrust: { policyType: 'FulcioCAWithRekor', fulcioCAWithRekor: { fulcioCAData: pem('CERTIFICATE'), rekorKeyData: pem('PUBLIC KEY'), fulcioSubject: { oidcIssuer: '/issuer', signedEmail: 'me@example.com' } } } } }).problems, []);
  assert.deepEqual(parse({ scopes: ['quay.io'], policy: { rootOfTrust: { policyType: 'PKI', pki: { caRootsData: pem('CERTIFICATE'), pkiCertificateSubject: {} } } } }).problems, [['spec.policy.rootOfTrust.pki.pkiCertificateSubject', 'pki-subject']]);
  assert.deepEqual(parse({ scopes: ['quay.io'], policy: { rootOfTrust: { policyType: 'Keyless' } } }).problems, [['spec.policy.rootOfTrust.policyType', 'policy-type']]);
  for (const member of ['abc', [1], true]) {
    const r = parse({ scopes: ['quay.io'], policy: { rootOfTrust: { policyType: 'PublicKey', publicKey: member } } });
    assert.equal(r.policy, undefined, `publicKey: ${JSON.stringify(member)} is refused`);
    assert.deepEqual(r.problems.map(([field]) => field), ['spec.policy.rootOfTrust.publicKey']);
  }
  assert.deepEqual(parse({ scopes: ['quay.io'], policy: 'signed' }).problems.map(([field]) => field), ['spec.policy'], 'a policy of the wrong type is one problem, not two');
  assert.deepEqual(parse({ scopes: ['quay.io'], policy: { rootOfTrust: { policyType: 'PublicKey', publicKey: { keyData: pem('PUBLIC KEY') } }, signedIdentity: { matchPolicy: 'RemapIdentity', remapIdentity: { prefix: 'quay.io/team:v1', signedPrefix: 'Quay' } } } }).problems, [
    ['spec.policy.signedIdentity.remapIdentity.prefix', 'identity-prefix'], ['spec.policy.signedIdentity.remapIdentity.signedPrefix', 'identity-prefix'],
  ]);
  assert.deepEqual(parse({ scopes: ['quay.io'], policy: { rootOfTrust: { policyType: 'PublicKey', publicKey: { keyData: pem('PUBLIC KEY') } }, signedIdentity: { matchPolicy: 'ExactRepository' } } }).problems, [['spec.policy.signedIdentity.exactRepository', 'signed-identity']]);
});
