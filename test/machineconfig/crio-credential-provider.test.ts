// CRIOCredentialProviderConfig made into the kubelet's credential provider config as MCO makes it.
// Cases are ported from machine-config-operator 7ff337a4
// pkg/controller/container-runtime-config/helpers_test.go (TestUpdateCredentialProviderConfig);
// the CRD's rules from openshift/api config/v1 types_crio_credential_provider_config.go.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse } from 'yaml';
import {
  generateCredentialProviderFiles, GENERIC_CREDENTIAL_PROVIDER_CONFIG_PATH, KUBELET_CRIO_CREDENTIAL_PROVIDER_DROPIN_PATH, parseCrioCredentialProviderConfig, updateCredentialProviderConfig,
  type CrioCredentialProviderConfig,
} from '../../src/machineconfig/crio-credential-provider.ts';
import { ProblemCollector } from '../../src/machineconfig/problem-collector.ts';

const GCR = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: gcr-credential-provider
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    matchImages:
      - "gcr.io"
      - "*.gcr.io"
      - "*.pkg.dev"
      - "container.cloud.google.com"
    defaultCacheDuration: "1m"
    args:
      - get-credentials
      - --v=3
`;
const GCR_WITH_CRIO = `${GCR}  - name: crio-credential-provider
    matchImages:
      - "docker.io"
      - "*.example.io"
      - "quay.io"
      - "registry.example.com:5000"
    defaultCacheDuration: "1s"
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    tokenAttributes:
      serviceAccountTokenAudience: https://kubernetes.default.svc
      cacheType: "Token"
      requireServiceAccount: false
`;
const gcrProvider = { name: 'gcr-credential-provider', apiVersion: 'credentialprovider.kubelet.k8s.io/v1', matchImages: ['gcr.io', '*.gcr.io', '*.pkg.dev', 'container.cloud.google.com'], defaultCacheDuration: '1m0s', args: ['get-credentials', '--v=3'] };
const crio = (matchImages: string[]) => ({
  name: 'crio-credential-provider', matchImages, apiVersion: 'credentialprovider.kubelet.k8s.io/v1', defaultCacheDuration: '1s',
  tokenAttributes: { serviceAccountTokenAudience: 'https://kubernetes.default.svc', cacheType: 'Token', requireServiceAccount: false },
});
const config = (...providers: object[]) => ({ apiVersion: 'kubelet.config.k8s.io/v1', kind: 'CredentialProviderConfig', providers });

test('TestUpdateCredentialProviderConfig: the crio-credential-provider entry, added or updated, overlapping images left out', () => {
  const cases: { name: string; images: string[]; base?: string; overlapped?: string[]; expected?: object }[] = [
    { name: 'add crio-credential-provider when template config is nil', images: ['myhost.com', 'quay.io'], expected: config(crio(['myhost.com', 'quay.io'])) },
    { name: 'add crio-credential-provider when not present', images: ['myhost.com', 'quay.io'], base: GCR, expected: config(gcrProvider, crio(['myhost.com', 'quay.io'])) },
    { name: 'crio-credential-provider already present', images: ['myhost.com'], base: GCR_WITH_CRIO, expected: config(gcrProvider, crio(['myhost.com'])) },
    { name: 'all matchImages overlap with existing provider - returns nil', images: ['gcr.io', '*.cloud.google.com', '*.gcr.io', '*.pkg.dev'], base: GCR, overlapped: ['*.cloud.google.com', '*.gcr.io', '*.pkg.dev', 'gcr.io'] },
    { name: 'overlapping matchImages with existing provider', images: ['gcr.io', 'myhost.com', '*.cloud.google.com', 'quay.io'], base: GCR, overlapped: ['*.cloud.google.com', 'gcr.io'], expected: config(gcrProvider, crio(['myhost.com', 'quay.io'])) },
  ];
  for (const c of cases) {
    const { yaml, overlapped } = updateCredentialProviderConfig(c.base, c.images);
    assert.deepEqual(overlapped, c.overlapped ?? [], c.name);
    if (!c.expected) assert.equal(yaml, undefined, c.name);
    else assert.deepEqual(parse(yaml!), c.expected, c.name);
  }
});

test('the file is written as ghodss/yaml writes MCO\'s struct: keys sorted, the provider\'s fields in full', () => {
  assert.equal(updateCredentialProviderConfig(undefined, ['quay.io']).yaml, [
    'apiVersion: kubelet.config.k8s.io/v1', 'kind: CredentialProviderConfig', 'providers:', '- apiVersion: credentialprovider.kubelet.k8s.io/v1',
    '  defaultCacheDuration: 1s', '  matchImages:', '  - quay.io', '  name: crio-credential-provider', '  tokenAttributes:',
    '    cacheType: Token', '    requireServiceAccount: false', '    serviceAccountTokenAudience: https://kubernetes.default.svc', '',
  ].join('\n'));
});

const cfg = (matchImages?: string[]): CrioCredentialProviderConfig => ({ apiVersion: 'config.openshift.io/v1', kind: 'CRIOCredentialProviderConfig', metadata: { name: 'cluster' }, ...(matchImages ? { spec: { matchImages } } : {}) });

test('a pool without a platform file gets the generic file and the kubelet drop-in; one with the platform\'s file gets it edited; no images, no file', () => {
  const generic = generateCredentialProviderFiles(cfg(['quay.io']), new Map());
  assert.deepEqual(generic.files.map((f) => f.path), [GENERIC_CREDENTIAL_PROVIDER_CONFIG_PATH, KUBELET_CRIO_CREDENTIAL_PROVIDER_DROPIN_PATH]);
  assert.match(generic.files[1]!.contents, /--image-credential-provider-config=\/etc\/kubernetes\/credential-providers\/generic-credential-provider\.yaml"\n$/);
  const gcr = '/etc/kubernetes/credential-providers/gcr-credential-provider.yaml';
  const platform = generateCredentialProviderFiles(cfg(['quay.io']), new Map([[gcr, GCR]]));
  assert.deepEqual(platform.files.map((f) => f.path), [gcr]);
  assert.deepEqual(parse(platform.files[0]!.contents).providers.map((p: { name: string }) => p.name), ['gcr-credential-provider', 'crio-credential-provider']);
  assert.deepEqual(generateCredentialProviderFiles(cfg(), new Map()).files, []);
  assert.deepEqual(generateCredentialProviderFiles(cfg(['gcr.io']), new Map([[gcr, GCR]])), { files: [], overlapped: ['gcr.io'] });
});

test('the base file is read as Go reads it: YAML 1.1, a value of another type refused naming it', () => {
  const yes = updateCredentialProviderConfig(`${GCR_WITH_CRIO.replace('requireServiceAccount: false', 'requireServiceAccount: yes')}`, ['myhost.com']).yaml!;
  assert.equal(parse(yes).providers[1].tokenAttributes.requireServiceAccount, true, 'yes is true in YAML 1.1');
  assert.throws(() => updateCredentialProviderConfig('providers:\n  - name: x\n    matchImages: quay.io\n', ['a.io']), /providers\[0\]\.matchImages must be a list/);
  assert.throws(() => updateCredentialProviderConfig('providers:\n  - name: x\n    env: [1]\n', ['a.io']), /providers\[0\]\.env\[0\] must be a mapping/);
});

test('the CRD\'s rules: the singleton cluster, a spec, 1 to 50 images, each once, no global wildcard, lowercase hosts', () => {
  const problems = (doc: Record<string, unknown>) => {
    const c = new ProblemCollector('CRIOCredentialProviderConfig/x');
    parseCrioCredentialProviderConfig({ apiVersion: 'config.openshift.io/v1', kind: 'CRIOCredentialProviderConfig', metadata: { name: 'cluster' }, ...doc }, c);
    return c.problems.map((p) => [p.field, p.rule]);
  };
  assert.deepEqual(problems({ spec: { matchImages: ['quay.io', '*.example.io', 'registry.example.com:5000/team'] } }), []);
  assert.deepEqual(problems({}), [['spec', 'required']]);
  assert.deepEqual(problems({ spec: {} }), [], 'an empty spec is a spec');
  assert.deepEqual(problems({ spec: { matchImages: ['quay.io', 'quay.io'] } }), [['spec.matchImages[1]', 'duplicate-entry']]);
  assert.deepEqual(problems({ spec: { matchImages: [1, 'a..b'] } }), [['spec.matchImages[0]', 'type'], ['spec.matchImages[1]', 'match-image']], 'each problem names its own entry');
  assert.deepEqual(problems({ metadata: { name: 'other' }, spec: {} }), [['metadata.name', 'cluster-name']]);
  assert.deepEqual(problems({ spec: { matchImages: [] } }), [['spec.matchImages', 'match-images']]);
  assert.deepEqual(problems({ spec: { matchImages: ['*', 'Quay.io'] } }), [['spec.matchImages[0]', 'match-image'], ['spec.matchImages[1]', 'match-image']]);
});
