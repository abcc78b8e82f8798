// TLS security profiles (config.openshift.io/v1 TLSSecurityProfile, the type of KubeletConfig's
// spec.tlsSecurityProfile and APIServer's) and how MCO turns one into the kubelet's
// tlsMinVersion and tlsCipherSuites. Pure tables, no I/O. Followed files (machine-config-operator
// 7ff337a4, and what it vendors):
//   pkg/controller/common/helpers.go: GetSecurityProfileCiphers, GetSecurityProfileCiphersFromAPIServer
//   vendor/github.com/openshift/api/config/v1/types_tlssecurityprofile.go: TLSProfiles (old,
//     intermediate, modern), the TLSProfileType and TLSProtocolVersion enums, TLSGroup
//   vendor/github.com/openshift/library-go/pkg/crypto/crypto.go: openSSLToIANACiphers,
//     OpenSSLToIANACipherSuites (names Go's crypto/tls cannot negotiate are dropped)
//   vendor/github.com/openshift/api/machineconfiguration/v1/zz_generated.crd-manifests/
//     0000_80_machine-config_01_kubeletconfigs-{Default,TechPreviewNoUpgrade}.crd.yaml: the schema
//     the API server checks before MCO ever sees the object (so the only refusals there are)

import { quote } from './control-characters.ts';
import type { ProblemCollector } from './problem-collector.ts';

export const TLS_PROFILE_OLD = 'Old';
export const TLS_PROFILE_INTERMEDIATE = 'Intermediate';
export const TLS_PROFILE_MODERN = 'Modern';
export const TLS_PROFILE_CUSTOM = 'Custom';
/** +kubebuilder:validation:Enum=Old;Intermediate;Modern;Custom */
export const TLS_PROFILE_TYPES = [TLS_PROFILE_OLD, TLS_PROFILE_INTERMEDIATE, TLS_PROFILE_MODERN, TLS_PROFILE_CUSTOM] as const;
/** +kubebuilder:validation:Enum=VersionTLS10;VersionTLS11;VersionTLS12;VersionTLS13 */
export const TLS_PROTOCOL_VERSIONS = ['VersionTLS10', 'VersionTLS11', 'VersionTLS12', 'VersionTLS13'] as const;
/** TLSGroup's enum; groups exist only behind the TLSGroupPreferences gate (TechPreview) and never reach the kubelet. */
export const TLS_GROUPS = ['X25519', 'secp256r1', 'secp384r1', 'secp521r1', 'X25519MLKEM768', 'SecP256r1MLKEM768', 'SecP384r1MLKEM1024'] as const;
const MAX_TLS_GROUPS = 7;

export interface TLSProfileSpec {
  /** OpenSSL names (TLS 1.3 suites by their IANA names), as the API spells them. */
  ciphers: string[];
  /** "" when a custom profile leaves it out. */
  minTLSVersion: string;
  groups?: string[];
}

/** A profile as stored: custom fields the object leaves out stay out, so it parses again as applied. */
export interface TLSSecurityProfile {
  /** Absent when the object leaves it out (Go's ""). */
  type?: string;
  /** The custom profile's spec; absent when `custom` is absent or null. */
  custom?: Partial<TLSProfileSpec>;
}

const GROUPS_DEFAULT = ['X25519MLKEM768', 'X25519', 'secp256r1', 'secp384r1'];
const TLS13 = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];
const INTERMEDIATE_TLS12 = [
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305', 'ECDHE-RSA-CHACHA20-POLY1305',
];

/** configv1.TLSProfiles: each list is Mozilla 5.8's "ciphersuites" followed by its "ciphers". */
export const TLS_PROFILES: Readonly<Record<typeof TLS_PROFILE_OLD | typeof TLS_PROFILE_INTERMEDIATE | typeof TLS_PROFILE_MODERN, Readonly<TLSProfileSpec>>> = {
  Old: {
    ciphers: [
      ...TLS13, ...INTERMEDIATE_TLS12,
      'ECDHE-ECDSA-AES128-SHA256', 'ECDHE-RSA-AES128-SHA256', 'ECDHE-ECDSA-AES128-SHA', 'ECDHE-RSA-AES128-SHA',
      'ECDHE-ECDSA-AES256-SHA384', 'ECDHE-RSA-AES256-SHA384', 'ECDHE-ECDSA-AES256-SHA', 'ECDHE-RSA-AES256-SHA',
      'AES128-GCM-SHA256', 'AES256-GCM-SHA384', 'AES128-SHA256', 'AES256-SHA256', 'AES128-SHA', 'AES256-SHA',
      'DES-CBC3-SHA',
    ],
    groups: GROUPS_DEFAULT,
    minTLSVersion: 'VersionTLS10',
  },
  Intermediate: { ciphers: [...TLS13, ...INTERMEDIATE_TLS12], groups: GROUPS_DEFAULT, minTLSVersion: 'VersionTLS12' },
  Modern: { ciphers: [...TLS13], groups: GROUPS_DEFAULT, minTLSVersion: 'VersionTLS13' },
};

/**
 * library-go's openSSLToIANACiphers: the names Go's crypto/tls can negotiate. ECDHE-*-AES256-SHA384
 * and AES256-SHA256 (ciphersUnsupportedByGo) are missing on purpose, so the Old profile loses them.
 */
export const OPENSSL_TO_IANA_CIPHERS: Readonly<Record<string, string>> = {
  // TLS 1.3: always negotiated by Go, not individually configurable.
  'TLS_AES_128_GCM_SHA256': 'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384': 'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256': 'TLS_CHACHA20_POLY1305_SHA256',
  // TLS 1.2
  'ECDHE-ECDSA-AES128-GCM-SHA256': 'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256': 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384': 'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384': 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305': 'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256',
  'ECDHE-RSA-CHACHA20-POLY1305': 'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-SHA256': 'TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256',
  'ECDHE-RSA-AES128-SHA256': 'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256',
  'AES128-GCM-SHA256': 'TLS_RSA_WITH_AES_128_GCM_SHA256',
  'AES256-GCM-SHA384': 'TLS_RSA_WITH_AES_256_GCM_SHA384',
  'AES128-SHA256': 'TLS_RSA_WITH_AES_128_CBC_SHA256',
  // TLS 1
  'ECDHE-ECDSA-AES128-SHA': 'TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA',
  'ECDHE-RSA-AES128-SHA': 'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA',
  'ECDHE-ECDSA-AES256-SHA': 'TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA',
  'ECDHE-RSA-AES256-SHA': 'TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA',
  // SSL 3
  'AES128-SHA': 'TLS_RSA_WITH_AES_128_CBC_SHA',
  'AES256-SHA': 'TLS_RSA_WITH_AES_256_CBC_SHA',
  'DES-CBC3-SHA': 'TLS_RSA_WITH_3DES_EDE_CBC_SHA',
  'ECDHE-RSA-DES-CBC3-SHA': 'TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA',
};

/** OpenSSLToIANACipherSuites: in the given order; a name Go cannot negotiate is dropped, not refused. */
export function openSSLToIANACipherSuites(ciphers: readonly string[]): string[] {
  const out: string[] = [];
  for (const c of ciphers) {
    if (Object.hasOwn(OPENSSL_TO_IANA_CIPHERS, c)) out.push(OPENSSL_TO_IANA_CIPHERS[c]!);
  }
  return out;
}

export interface KubeletTLSSettings {
  /** "" means the kubelet.conf leaves tlsMinVersion out (omitempty), so the kubelet's default applies. */
  tlsMinVersion: string;
  /** [] means tlsCipherSuites is left out, so Go's default suites apply. */
  tlsCipherSuites: string[];
}

/**
 * GetSecurityProfileCiphers. No profile, a type with no table (absent), or Custom without a
 * `custom` block all mean Intermediate. A Custom profile is taken as written, even with no
 * ciphers or no minTLSVersion: MCO does not refuse those, it writes an empty value.
 */
export function securityProfileCiphers(profile: TLSSecurityProfile | undefined): KubeletTLSSettings {
  const type = profile?.type ?? '';
  let spec: Readonly<Partial<TLSProfileSpec>> | undefined;
  if (type === TLS_PROFILE_CUSTOM) spec = profile?.custom;
  else if (Object.hasOwn(TLS_PROFILES, type)) spec = TLS_PROFILES[type as keyof typeof TLS_PROFILES];
  spec ??= TLS_PROFILES.Intermediate;
  return { tlsMinVersion: spec.minTLSVersion ?? '', tlsCipherSuites: openSSLToIANACipherSuites(spec.ciphers ?? []) };
}

/**
 * Validates a TLSSecurityProfile the way the KubeletConfig (or APIServer) CRD schema does: the
 * type and minTLSVersion enums, ciphers as a list of strings, old/intermediate/modern as empty
 * objects, and groups (TechPreview's schema: 1 to 7 unique known groups). Every problem goes into
 * `c`; undefined when the field is absent or null, or when there was a problem.
 */
export function parseTLSSecurityProfile(value: unknown, c: ProblemCollector, field: string): TLSSecurityProfile | undefined {
  const raw = c.record(value, field);
  if (!raw) return undefined;
  const before = c.problems.length;
  c.onlyKeys(raw, field, ['type', 'old', 'intermediate', 'modern', 'custom']);
  const out: TLSSecurityProfile = {};
  const type = c.string(raw.type, field, 'type');
  if (type !== undefined) {
    if (!(TLS_PROFILE_TYPES as readonly string[]).includes(type)) {
      c.add(`${field}.type`, 'tls-profile-type', `type must be one of ${TLS_PROFILE_TYPES.join(', ')}, got ${quote(type, 100)}`);
    }
    out.type = type;
  }
  for (const named of ['old', 'intermediate', 'modern'] as const) {
    const block = c.record(raw[named], field, named);
    // These profiles have no parameters: their settings come from the table, whatever is written here.
    if (block) c.onlyKeys(block, `${field}.${named}`, []);
  }
  const custom = c.record(raw.custom, field, 'custom');
  if (custom) {
    const f = `${field}.custom`;
    c.onlyKeys(custom, f, ['ciphers', 'minTLSVersion', 'groups']);
    const spec: Partial<TLSProfileSpec> = {};
    const ciphers = c.array(custom.ciphers, f, 'ciphers');
    if (ciphers) {
      spec.ciphers = [];
      ciphers.forEach((v, i) => {
        const s = c.string(v, `${f}.ciphers[${i}]`);
        if (s !== undefined) spec.ciphers!.push(s);
      });
    }
    const min = c.string(custom.minTLSVersion, f, 'minTLSVersion');
    if (min !== undefined) {
      if (!(TLS_PROTOCOL_VERSIONS as readonly string[]).includes(min)) {
        c.add(`${f}.minTLSVersion`, 'tls-min-version', `minTLSVersion must be one of ${TLS_PROTOCOL_VERSIONS.join(', ')}, got ${quote(min, 100)}`);
      }
      spec.minTLSVersion = min;
    }
    const groups = c.array(custom.groups, f, 'groups');
    if (groups) {
      if (groups.length < 1 || groups.length > MAX_TLS_GROUPS) c.add(`${f}.groups`, 'tls-groups', `groups must list 1 to ${MAX_TLS_GROUPS} groups, got ${groups.length}`);
      const seen = new Set<string>();
      spec.groups = [];
      groups.forEach((v, i) => {
        const g = c.string(v, `${f}.groups[${i}]`);
        if (g === undefined) return;
        if (!(TLS_GROUPS as readonly string[]).includes(g)) c.add(`${f}.groups[${i}]`, 'tls-groups', `group must be one of ${TLS_GROUPS.join(', ')}, got ${quote(g, 100)}`);
        else if (seen.has(g)) c.add(`${f}.groups[${i}]`, 'tls-groups', `group ${g} is listed twice (groups is a set)`);
        seen.add(g);
        spec.groups!.push(g);
      });
    }
    out.custom = spec;
  }
  return c.problems.length === before ? out : undefined;
}

