// The TLS profile tables and MCO's profile -> kubelet settings, following machine-config-operator
// 7ff337a4: pkg/controller/common/helpers.go (GetSecurityProfileCiphers), the vendored
// github.com/openshift/api/config/v1/types_tlssecurityprofile.go (TLSProfiles, the enums) and
// github.com/openshift/library-go/pkg/crypto/crypto.go (openSSLToIANACiphers,
// ciphersUnsupportedByGo), and the KubeletConfig CRD schema
// (vendor/github.com/openshift/api/machineconfiguration/v1/zz_generated.crd-manifests/
// 0000_80_machine-config_01_kubeletconfigs-Default.crd.yaml). The expected lists are written out
// by hand from those files, not derived from the tables under test.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ProblemCollector } from '../../src/machineconfig/problem-collector.ts';
import { OPENSSL_TO_IANA_CIPHERS, openSSLToIANACipherSuites, parseTLSSecurityProfile, securityProfileCiphers, TLS_PROFILES } from '../../src/machineconfig/tls-profile.ts';

const TLS13 = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];
const INTERMEDIATE_IANA = [...TLS13,
  'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256',
  'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384', 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384',
  'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256', 'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256'];
// Old's 24 OpenSSL names less the three Go cannot negotiate (ECDHE-ECDSA-AES256-SHA384,
// ECDHE-RSA-AES256-SHA384, AES256-SHA256), in the profile's order.
const OLD_IANA = [...INTERMEDIATE_IANA,
  'TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256', 'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256',
  'TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA', 'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA',
  'TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA', 'TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA',
  'TLS_RSA_WITH_AES_128_GCM_SHA256', 'TLS_RSA_WITH_AES_256_GCM_SHA384', 'TLS_RSA_WITH_AES_128_CBC_SHA256',
  'TLS_RSA_WITH_AES_128_CBC_SHA', 'TLS_RSA_WITH_AES_256_CBC_SHA', 'TLS_RSA_WITH_3DES_EDE_CBC_SHA'];

test('TLSProfiles (types_tlssecurityprofile.go): Old, Intermediate, Modern with their minTLSVersion and OpenSSL cipher lists', () => {
  assert.equal(TLS_PROFILES.Old.minTLSVersion, 'VersionTLS10');
  assert.equal(TLS_PROFILES.Intermediate.minTLSVersion, 'VersionTLS12');
  assert.equal(TLS_PROFILES.Modern.minTLSVersion, 'VersionTLS13');
  assert.deepEqual(TLS_PROFILES.Modern.ciphers, TLS13);
  assert.deepEqual(TLS_PROFILES.Intermediate.ciphers, [...TLS13, 'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305', 'ECDHE-RSA-CHACHA20-POLY1305']);
  assert.equal(TLS_PROFILES.Old.ciphers.length, 24);
  assert.deepEqual(TLS_PROFILES.Old.ciphers.slice(9), ['ECDHE-ECDSA-AES128-SHA256', 'ECDHE-RSA-AES128-SHA256', 'ECDHE-ECDSA-AES128-SHA', 'ECDHE-RSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA384', 'ECDHE-RSA-AES256-SHA384', 'ECDHE-ECDSA-AES256-SHA', 'ECDHE-RSA-AES256-SHA', 'AES128-GCM-SHA256', 'AES256-GCM-SHA384', 'AES128-SHA256', 'AES256-SHA256', 'AES128-SHA', 'AES256-SHA', 'DES-CBC3-SHA']);
});

test('OpenSSLToIANACipherSuites (library-go crypto.go): 22 names mapped, order kept, the ones Go lacks dropped without an error', () => {
  assert.equal(Object.keys(OPENSSL_TO_IANA_CIPHERS).length, 22);
  // ciphersUnsupportedByGo: in the Old profile, never in the map.
  for (const name of ['ECDHE-ECDSA-AES256-SHA384', 'ECDHE-RSA-AES256-SHA384', 'AES256-SHA256']) assert.equal(Object.hasOwn(OPENSSL_TO_IANA_CIPHERS, name), false, name);
  // Every other name a profile lists is mapped (library-go's TestOpenSSLToIANACipherSuites idea).
  for (const profile of Object.values(TLS_PROFILES)) {
    for (const name of profile.ciphers) if (!['ECDHE-ECDSA-AES256-SHA384', 'ECDHE-RSA-AES256-SHA384', 'AES256-SHA256'].includes(name)) assert.ok(Object.hasOwn(OPENSSL_TO_IANA_CIPHERS, name), name);
  }
  assert.deepEqual(openSSLToIANACipherSuites(['ECDHE-RSA-DES-CBC3-SHA', 'no-such-cipher', 'AES256-SHA256', 'toString', 'AES128-SHA']), ['TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA', 'TLS_RSA_WITH_AES_128_CBC_SHA']);
});

test('GetSecurityProfileCiphers: each profile type; no profile, no type and Custom without custom all mean Intermediate', () => {
  assert.deepEqual(securityProfileCiphers({ type: 'Old' }), { tlsMinVersion: 'VersionTLS10', tlsCipherSuites: OLD_IANA });
  assert.deepEqual(securityProfileCiphers({ type: 'Intermediate' }), { tlsMinVersion: 'VersionTLS12', tlsCipherSuites: INTERMEDIATE_IANA });
  assert.deepEqual(securityProfileCiphers({ type: 'Modern' }), { tlsMinVersion: 'VersionTLS13', tlsCipherSuites: TLS13 });
  const intermediate = { tlsMinVersion: 'VersionTLS12', tlsCipherSuites: INTERMEDIATE_IANA };
  assert.deepEqual(securityProfileCiphers(undefined), intermediate);
  assert.deepEqual(securityProfileCiphers({}), intermediate);
  assert.deepEqual(securityProfileCiphers({ type: 'Custom' }), intermediate);
  // A named type ignores a custom block; an unknown type (only reachable past the schema) has no table.
  assert.deepEqual(securityProfileCiphers({ type: 'Modern', custom: { ciphers: ['AES128-SHA'], minTLSVersion: 'VersionTLS10' } }).tlsMinVersion, 'VersionTLS13');
  assert.deepEqual(securityProfileCiphers({ type: 'Strict' }), intermediate);
  // kubelet_config_controller_test.go's "Custom TLS profile" case.
  assert.deepEqual(securityProfileCiphers({ type: 'Custom', custom: { ciphers: [...TLS13, 'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384'], minTLSVersion: 'VersionTLS12' } }), { tlsMinVersion: 'VersionTLS12', tlsCipherSuites: INTERMEDIATE_IANA.slice(0, 6) });
  // Custom is taken as written: MCO refuses neither an empty cipher list nor a missing version.
  assert.deepEqual(securityProfileCiphers({ type: 'Custom', custom: { ciphers: [] } }), { tlsMinVersion: '', tlsCipherSuites: [] });
  assert.deepEqual(securityProfileCiphers({ type: 'Custom', custom: {} }), { tlsMinVersion: '', tlsCipherSuites: [] });
});

test('the CRD schema\'s refusals: type and minTLSVersion enums, ciphers a list of strings, no unknown fields; each names field and rule', () => {
  const check = (value: unknown) => {
    const c = new ProblemCollector('KubeletConfig/x');
    const profile = parseTLSSecurityProfile(value, c, 'spec.tlsSecurityProfile');
    return { profile, problems: c.problems.map((p) => `${p.field} ${p.rule}`) };
  };
  assert.deepEqual(check({ type: 'Strict' }).problems, ['spec.tlsSecurityProfile.type tls-profile-type']);
  assert.deepEqual(check({ type: '' }).problems, ['spec.tlsSecurityProfile.type tls-profile-type']);
  assert.deepEqual(check({ type: 'Custom', custom: { ciphers: 'AES128-SHA', minTLSVersion: 'TLSv1.2' } }).problems, ['spec.tlsSecurityProfile.custom.ciphers type', 'spec.tlsSecurityProfile.custom.minTLSVersion tls-min-version']);
  assert.deepEqual(check({ type: 'Custom', custom: { ciphers: ['AES128-SHA', 7] } }).problems, ['spec.tlsSecurityProfile.custom.ciphers[1] type']);
  assert.deepEqual(check({ type: 'Old', old: { ciphers: [] }, fips: true }).problems, ['spec.tlsSecurityProfile.fips unknown-field', 'spec.tlsSecurityProfile.old.ciphers unknown-field']);
  assert.deepEqual(check({ type: 'Custom', custom: { ciphers: ['AES128-SHA'], minTLSVersion: 'VersionTLS12', groups: ['X25519', 'X25519', 'P-256'] } }).problems, ['spec.tlsSecurityProfile.custom.groups[1] tls-groups', 'spec.tlsSecurityProfile.custom.groups[2] tls-groups']);
  assert.deepEqual(check('Modern').problems, ['spec.tlsSecurityProfile type']);
  // Accepted as MCO accepts them: null blocks, an empty profile, Custom without ciphers.
  assert.deepEqual(check({ type: 'Modern', modern: {}, custom: null }), { profile: { type: 'Modern' }, problems: [] });
  assert.deepEqual(check({}), { profile: {}, problems: [] });
  assert.deepEqual(check({ type: 'Custom', custom: { minTLSVersion: 'VersionTLS13' } }), { profile: { type: 'Custom', custom: { minTLSVersion: 'VersionTLS13' } }, problems: [] });
  assert.deepEqual(check(null), { profile: undefined, problems: [] });
});
