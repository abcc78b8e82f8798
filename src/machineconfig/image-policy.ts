// ClusterImagePolicy (config.openshift.io/v1): sigstore signature verification for image scopes.
// MCO (behind SigstoreImageVerification, on in the Default feature set) puts each policy's
// requirement into policy.json for its scopes, and has the scopes and their mirrors read sigstore
// attachments (/etc/containers/registries.d/sigstore-registries.yaml), both in
// `99-<pool>-generated-registries`. Followed at machine-config-operator 7ff337a4:
// pkg/controller/container-runtime-config/helpers.go (policyItemFromSpec, getValidScopePolicies,
// validateImagePolicyWithAllowedBlockedRegistries, generateSigstoreRegistriesdConfig,
// addScopeMirrorsSigstoreRegistriesdConfig), the CRD's rules in openshift/api config/v1
// types_image_policy.go, containers/image signature's JSON for a sigstoreSigned requirement, and
// sysregistriesv2's FindRegistry and PullSourcesFromReference for the mirrors.
// The namespaced ImagePolicy is not taken (it needs namespaced objects, which mcplane does not
// store): Apply refuses it and says so.

import { quote } from './control-characters.ts';
import { GenerateConfigError } from './errors.ts';
import { stringifyGoYaml } from './go-yaml.ts';
import { checkApi, CONFIG_API_VERSION } from './image-config.ts';
import { parseObjectMeta } from './object-meta.ts';
import { isRecord, type ProblemCollector } from './problem-collector.ts';
import { compare, MIRROR_BY_DIGEST_ONLY, MIRROR_BY_TAG_ONLY, type PolicyRequirement, type RegistriesConf, type Registry, type RegistryEndpoint, scopeIsNestedInsideScope } from './registries-config.ts';
import type { ObjectMeta } from './types.ts';

export const KIND_CLUSTER_IMAGE_POLICY = 'ClusterImagePolicy';
export const SIGSTORE_REGISTRIES_PATH = '/etc/containers/registries.d/sigstore-registries.yaml';

/** PolicyRootOfTrust; byte fields are base64, as the API carries them. */
export interface RootOfTrust {
  policyType: 'PublicKey' | 'FulcioCAWithRekor' | 'PKI';
  publicKey?: { keyData: string; rekorKeyData?: string };
  fulcioCAWithRekor?: { fulcioCAData: string; rekorKeyData: string; fulcioSubject: { oidcIssuer: string; signedEmail: string } };
  pki?: { caRootsData: string; caIntermediatesData?: string; pkiCertificateSubject: { email?: string; hostname?: string } };
}

export interface PolicyIdentity {
  matchPolicy: 'MatchRepoDigestOrExact' | 'MatchRepository' | 'ExactRepository' | 'RemapIdentity';
  exactRepository?: { repository: string };
  remapIdentity?: { prefix: string; signedPrefix: string };
}

export interface SigstorePolicy {
  rootOfTrust: RootOfTrust;
  signedIdentity?: PolicyIdentity;
}

export interface ClusterImagePolicy {
  apiVersion: string;
  kind: typeof KIND_CLUSTER_IMAGE_POLICY;
  metadata: ObjectMeta;
  spec: { scopes: string[]; policy: SigstorePolicy };
}

// ---- the CRD's rules ---------------------------------------------------------------------------

const MAX_SCOPES = 256;
const MAX_SCOPE_CHARS = 512;
const WILDCARD_SCOPE = /^\*(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+$/;
const IMAGE_SCOPE = /^((((?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+(?::[0-9]+)?)|(localhost(?::[0-9]+)?))(?:(?:\/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?)(?::([\w][\w.-]{0,127}))?(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9A-Fa-f]{32,}))?$/;
const IDENTITY_PREFIX = /^(((?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+(?::[0-9]+)?)|(localhost(?::[0-9]+)?))(?:(?:\/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?$/;
const EMAIL = /^\S+@\S+$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const POLICY_TYPES = ['PublicKey', 'FulcioCAWithRekor', 'PKI'] as const;
const MATCH_POLICIES = ['MatchRepoDigestOrExact', 'MatchRepository', 'ExactRepository', 'RemapIdentity'] as const;

/** ImageScope's three XValidation rules, and its MaxLength; undefined when the scope is valid. */
function scopeProblem(scope: string): string | undefined {
  if (scope.length > MAX_SCOPE_CHARS) return `a scope is at most ${MAX_SCOPE_CHARS} characters, got ${scope.length}`;
  const host = scope.split('/')[0]!;
  if (host.split('.').length === 1 && host.split(':')[0] !== 'localhost') return 'invalid image scope format, scope must contain a fully qualified domain name or \'localhost\'';
  if (scope.includes('*')) {
    return WILDCARD_SCOPE.test(scope) ? undefined : 'invalid image scope with wildcard, a wildcard can only be at the start of the domain and is only supported for subdomain matching, not path matching';
  }
  return IMAGE_SCOPE.test(scope) ? undefined : 'invalid repository namespace or image specification in the image scope';
}

/**
 * A []byte field: base64 as Go's encoding/json reads it (newlines ignored, padding required),
 * checked as the CRD checks the decoded bytes (PEM markers) and the base64 text (length).
 */
function pemBytes(c: ProblemCollector, raw: unknown, field: string, what: 'PUBLIC KEY' | 'CERTIFICATE', limits: { min?: number; required: boolean }): string | undefined {
  if (raw === undefined || raw === null) {
    if (limits.required) c.add(field, 'required', `${field.split('.').at(-1)} is required`);
    return undefined;
  }
  const text = c.string(raw, field);
  if (text === undefined) return undefined;
  const name = field.split('.').at(-1)!;
  const compact = text.replace(/[\r\n]/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 !== 0) {
    c.add(field, 'base64', `${name} must be base64 (standard alphabet, padded), as the API carries bytes`);
    return undefined;
  }
  if (text.length > 8192) c.add(field, 'pem-data', `${name} is at most 8192 characters of base64, got ${text.length}`);
  if (limits.min !== undefined && text.length < limits.min) c.add(field, 'pem-data', `${name} is at least ${limits.min} characters of base64, got ${text.length}`);
  const decoded = Buffer.from(compact, 'base64').toString('latin1');
  const begin = `-----BEGIN ${what}-----`;
  const end = `-----END ${what}-----`;
  if (!decoded.startsWith(begin)) c.add(field, 'pem-data', `the ${name} must start with base64 encoding of '${begin}'.`);
  else if (!decoded.endsWith(`${end}\n`) && !decoded.endsWith(end)) c.add(field, 'pem-data', `the ${name} must end with base64 encoding of '${end}'.`);
  else if (what === 'CERTIFICATE' && decoded.split(begin).length !== decoded.split(end).length) {
    c.add(field, 'pem-data', `${name} must be base64 encoding of valid PEM format data contain the same number of '${begin}' and '${end}' markers.`);
  }
  return compact;
}

function parseRootOfTrust(c: ProblemCollector, raw: unknown, f: string): RootOfTrust | undefined {
  const r = requiredRecord(c, raw, f);
  if (!r) return undefined;
  c.onlyKeys(r, f, ['policyType', 'publicKey', 'fulcioCAWithRekor', 'pki']);
  const policyType = c.string(r.policyType, f, 'policyType');
  if (policyType === undefined || !(POLICY_TYPES as readonly string[]).includes(policyType)) {
    c.add(`${f}.policyType`, 'policy-type', `policyType must be one of ${POLICY_TYPES.join(', ')}, got ${quote(String(policyType ?? '<none>'), 100)}`);
    return undefined;
  }
  const out: RootOfTrust = { policyType: policyType as RootOfTrust['policyType'] };
  // The union: the member named by policyType is required, the others forbidden.
  const members = { PublicKey: 'publicKey', FulcioCAWithRekor: 'fulcioCAWithRekor', PKI: 'pki' } as const;
  for (const [type, member] of Object.entries(members)) {
    const present = r[member] !== undefined && r[member] !== null;
    if (type === policyType && !present) c.add(`${f}.${member}`, 'root-of-trust', `${member} is required when policyType is ${type}, and forbidden otherwise`);
    if (type !== policyType && present) c.add(`${f}.${member}`, 'root-of-trust', `${member} is required when policyType is ${type}, and forbidden otherwise`);
  }
  // The member policyType names, which must be a mapping: a string or a list there is no key.
  const member = r[members[policyType as RootOfTrust['policyType']]];
  if (member !== undefined && member !== null && !isRecord(member)) {
    c.record(member, `${f}.${members[policyType as RootOfTrust['policyType']]}`);
    return undefined;
  }
  if (policyType === 'PublicKey' && isRecord(r.publicKey)) {
    const p = r.publicKey;
    const pf = `${f}.publicKey`;
    c.onlyKeys(p, pf, ['keyData', 'rekorKeyData']);
    const keyData = pemBytes(c, p.keyData, `${pf}.keyData`, 'PUBLIC KEY', { min: 68, required: true });
    const rekorKeyData = pemBytes(c, p.rekorKeyData, `${pf}.rekorKeyData`, 'PUBLIC KEY', { required: false });
    if (keyData !== undefined) out.publicKey = { keyData, ...(rekorKeyData !== undefined ? { rekorKeyData } : {}) };
  } else if (policyType === 'FulcioCAWithRekor' && isRecord(r.fulcioCAWithRekor)) {
    const p = r.fulcioCAWithRekor;
    const pf = `${f}.fulcioCAWithRekor`;
    c.onlyKeys(p, pf, ['fulcioCAData', 'rekorKeyData', 'fulcioSubject']);
    const fulcioCAData = pemBytes(c, p.fulcioCAData, `${pf}.fulcioCAData`, 'CERTIFICATE', { required: true });
    const rekorKeyData = pemBytes(c, p.rekorKeyData, `${pf}.rekorKeyData`, 'PUBLIC KEY', { required: true });
    const sf = `${pf}.fulcioSubject`;
    const s = requiredRecord(c, p.fulcioSubject, sf);
    if (s) c.onlyKeys(s, sf, ['oidcIssuer', 'signedEmail']);
    const oidcIssuer = s ? c.string(s.oidcIssuer, sf, 'oidcIssuer') : undefined;
    const signedEmail = s ? c.string(s.signedEmail, sf, 'signedEmail') : undefined;
    if (s && (oidcIssuer === undefined || oidcIssuer.length > 2048 || !isUrl(oidcIssuer))) c.add(`${sf}.oidcIssuer`, 'oidc-issuer', 'oidcIssuer must be a valid URL');
    if (s && (signedEmail === undefined || signedEmail.length > 320 || !EMAIL.test(signedEmail))) c.add(`${sf}.signedEmail`, 'email', 'invalid email address');
    if (fulcioCAData !== undefined && rekorKeyData !== undefined && oidcIssuer !== undefined && signedEmail !== undefined) {
      out.fulcioCAWithRekor = { fulcioCAData, rekorKeyData, fulcioSubject: { oidcIssuer, signedEmail } };
    }
  } else if (policyType === 'PKI' && isRecord(r.pki)) {
    const p = r.pki;
    const pf = `${f}.pki`;
    c.onlyKeys(p, pf, ['caRootsData', 'caIntermediatesData', 'pkiCertificateSubject']);
    const caRootsData = pemBytes(c, p.caRootsData, `${pf}.caRootsData`, 'CERTIFICATE', { min: 72, required: true });
    const caIntermediatesData = pemBytes(c, p.caIntermediatesData, `${pf}.caIntermediatesData`, 'CERTIFICATE', { min: 72, required: false });
    const sf = `${pf}.pkiCertificateSubject`;
    const s = requiredRecord(c, p.pkiCertificateSubject, sf);
    if (s) c.onlyKeys(s, sf, ['email', 'hostname']);
    const email = s ? c.string(s.email, sf, 'email') : undefined;
    const hostname = s ? c.string(s.hostname, sf, 'hostname') : undefined;
    if (s && email === undefined && hostname === undefined) c.add(sf, 'pki-subject', 'at least one of email or hostname must be set in pkiCertificateSubject');
    if (email !== undefined && (email.length > 320 || !EMAIL.test(email))) c.add(`${sf}.email`, 'email', 'invalid email address');
    const host = hostname?.startsWith('*.') ? hostname.slice(2) : hostname;
    if (hostname !== undefined && (hostname.length > 253 || !DNS_SUBDOMAIN.test(host!))) {
      c.add(`${sf}.hostname`, 'pki-hostname', 'hostname must be a valid dns 1123 subdomain name, optionally prefixed by \'*.\'. It must consist only of lowercase alphanumeric characters, hyphens, periods and the optional preceding asterisk.');
    }
    if (caRootsData !== undefined && s) {
      out.pki = {
        caRootsData,
        ...(caIntermediatesData !== undefined ? { caIntermediatesData } : {}),
        pkiCertificateSubject: { ...(email !== undefined ? { email } : {}), ...(hostname !== undefined ? { hostname } : {}) },
      };
    }
  }
  // A member with a problem (its key missing, say) leaves the root of trust incomplete.
  return out.publicKey || out.fulcioCAWithRekor || out.pki ? out : undefined;
}

/**
 * CEL's isURL, which is Go's url.ParseRequestURI: an absolute URL (a scheme) or an absolute path.
 */
function isUrl(text: string): boolean {
  if (text.startsWith('/')) return !/\s/.test(text);
  if (!/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(text)) return false;
  try {
    new URL(text);
    return true;
  } catch {
    return false;
  }
}

/** A required mapping: `required` when absent, the collector's type problem when not a mapping. */
function requiredRecord(c: ProblemCollector, raw: unknown, field: string): Record<string, unknown> | undefined {
  if (raw === undefined || raw === null) {
    c.add(field, 'required', `${field.split('.').at(-1)} is required`);
    return undefined;
  }
  return c.record(raw, field);
}

function parseIdentity(c: ProblemCollector, raw: unknown, f: string): PolicyIdentity | undefined {
  if (raw === undefined || raw === null) return undefined;
  const r = c.record(raw, f);
  if (!r) return undefined;
  c.onlyKeys(r, f, ['matchPolicy', 'exactRepository', 'remapIdentity']);
  const matchPolicy = c.string(r.matchPolicy, f, 'matchPolicy');
  if (matchPolicy === undefined || !(MATCH_POLICIES as readonly string[]).includes(matchPolicy)) {
    c.add(`${f}.matchPolicy`, 'match-policy', `matchPolicy must be one of ${MATCH_POLICIES.join(', ')}, got ${quote(String(matchPolicy ?? '<none>'), 100)}`);
    return undefined;
  }
  const out: PolicyIdentity = { matchPolicy: matchPolicy as PolicyIdentity['matchPolicy'] };
  const prefix = (value: unknown, field: string): string | undefined => {
    const text = c.string(value, field);
    if (text === undefined) {
      c.add(field, 'required', `${field.split('.').at(-1)} is required`);
      return undefined;
    }
    if (text.length > 512 || /.*:([\w][\w.-]{0,127})$/.test(text) && !/^(localhost:[0-9]+)$/.test(text)) {
      c.add(field, 'identity-prefix', 'invalid repository or prefix in the signedIdentity, should not include the tag or digest');
    } else if (!IDENTITY_PREFIX.test(text)) {
      c.add(field, 'identity-prefix', 'invalid repository or prefix in the signedIdentity. The repository or prefix must starts with \'localhost\' or a valid \'.\' separated domain. If contains registry paths, the path component names must start with at least one letter or number, with following parts able to be separated by one period, one or two underscore and multiple dashes.');
    }
    return text;
  };
  const exact = r.exactRepository !== undefined && r.exactRepository !== null;
  const remap = r.remapIdentity !== undefined && r.remapIdentity !== null;
  if ((matchPolicy === 'ExactRepository') !== exact) c.add(`${f}.exactRepository`, 'signed-identity', 'exactRepository is required when matchPolicy is ExactRepository, and forbidden otherwise');
  if ((matchPolicy === 'RemapIdentity') !== remap) c.add(`${f}.remapIdentity`, 'signed-identity', 'remapIdentity is required when matchPolicy is RemapIdentity, and forbidden otherwise');
  if (matchPolicy === 'ExactRepository' && exact) {
    const e = c.record(r.exactRepository, `${f}.exactRepository`);
    if (e) {
      c.onlyKeys(e, `${f}.exactRepository`, ['repository']);
      const repository = prefix(e.repository, `${f}.exactRepository.repository`);
      if (repository !== undefined) out.exactRepository = { repository };
    }
  }
  if (matchPolicy === 'RemapIdentity' && remap) {
    const m = c.record(r.remapIdentity, `${f}.remapIdentity`);
    if (m) {
      c.onlyKeys(m, `${f}.remapIdentity`, ['prefix', 'signedPrefix']);
      const p = prefix(m.prefix, `${f}.remapIdentity.prefix`);
      const s = prefix(m.signedPrefix, `${f}.remapIdentity.signedPrefix`);
      if (p !== undefined && s !== undefined) out.remapIdentity = { prefix: p, signedPrefix: s };
    }
  }
  return out;
}

/** Validates a ClusterImagePolicy with the CRD's rules; every problem goes into `c`. */
export function parseClusterImagePolicy(doc: Record<string, unknown>, c: ProblemCollector): ClusterImagePolicy | undefined {
  checkApi(doc, c, CONFIG_API_VERSION);
  const metadata = parseObjectMeta(doc.metadata, c);
  const spec = c.record(doc.spec, 'spec') ?? {};
  c.onlyKeys(spec, 'spec', ['scopes', 'policy']);
  const scopes = c.stringList(spec.scopes, 'spec', 'scopes');
  if (spec.scopes === undefined || spec.scopes === null) c.add('spec.scopes', 'required', 'scopes is required');
  if (scopes) {
    if (scopes.length > MAX_SCOPES) c.add('spec.scopes', 'scope-count', `scopes may list at most ${MAX_SCOPES}, got ${scopes.length}`);
    scopes.forEach((scope, i) => {
      const problem = scopeProblem(scope);
      if (problem) c.add(`spec.scopes[${i}]`, 'image-scope', `${quote(scope, 100)}: ${problem}`);
      else if (scopes.indexOf(scope) !== i) c.add(`spec.scopes[${i}]`, 'duplicate-entry', `${quote(scope, 100)} is listed twice (the list is a set)`);
    });
  }
  const policy = requiredRecord(c, spec.policy, 'spec.policy');
  if (policy) c.onlyKeys(policy, 'spec.policy', ['rootOfTrust', 'signedIdentity']);
  const rootOfTrust = policy ? parseRootOfTrust(c, policy.rootOfTrust, 'spec.policy.rootOfTrust') : undefined;
  const signedIdentity = policy ? parseIdentity(c, policy.signedIdentity, 'spec.policy.signedIdentity') : undefined;
  if (!metadata || !scopes || !rootOfTrust || !c.ok) return undefined;
  return { apiVersion: CONFIG_API_VERSION, kind: KIND_CLUSTER_IMAGE_POLICY, metadata, spec: { scopes, policy: { rootOfTrust, ...(signedIdentity ? { signedIdentity } : {}) } } };
}

// ---- policy.json requirements (policyItemFromSpec) ---------------------------------------------

/**
 * The sigstoreSigned requirement of `policy` as containers/image writes it in policy.json:
 * prSigstoreSigned's fields in their declared order, bytes as padded base64, signedIdentity
 * matchRepoDigestOrExact when the policy names none.
 */
export function sigstoreRequirement(policy: SigstorePolicy): PolicyRequirement {
  const b64 = (text: string): string => Buffer.from(text, 'base64').toString('base64');
  const r = policy.rootOfTrust;
  const out: PolicyRequirement = { type: 'sigstoreSigned' };
  if (r.policyType === 'PublicKey' && r.publicKey) {
    out.keyData = b64(r.publicKey.keyData);
    if (r.publicKey.rekorKeyData) out.rekorPublicKeyData = b64(r.publicKey.rekorKeyData);
  } else if (r.policyType === 'FulcioCAWithRekor' && r.fulcioCAWithRekor) {
    const f = r.fulcioCAWithRekor;
    out.fulcio = { caData: b64(f.fulcioCAData), oidcIssuer: f.fulcioSubject.oidcIssuer, subjectEmail: f.fulcioSubject.signedEmail };
    out.rekorPublicKeyData = b64(f.rekorKeyData);
  } else if (r.policyType === 'PKI' && r.pki) {
    const p = r.pki;
    out.pki = {
      caRootsData: b64(p.caRootsData),
      ...(p.caIntermediatesData ? { caIntermediatesData: b64(p.caIntermediatesData) } : {}),
      ...(p.pkiCertificateSubject.email ? { subjectEmail: p.pkiCertificateSubject.email } : {}),
      ...(p.pkiCertificateSubject.hostname ? { subjectHostname: p.pkiCertificateSubject.hostname } : {}),
    };
  }
  const id = policy.signedIdentity;
  if (id?.matchPolicy === 'RemapIdentity' && id.remapIdentity) out.signedIdentity = { type: 'remapIdentity', prefix: id.remapIdentity.prefix, signedPrefix: id.remapIdentity.signedPrefix };
  else if (id?.matchPolicy === 'ExactRepository' && id.exactRepository) out.signedIdentity = { type: 'exactRepository', dockerRepository: id.exactRepository.repository };
  else if (id?.matchPolicy === 'MatchRepository') out.signedIdentity = { type: 'matchRepository' };
  else out.signedIdentity = { type: 'matchRepoDigestOrExact' };
  return out;
}

/**
 * getValidScopePolicies for the cluster's policies: each scope's requirements, in the order of
 * `policies` (MCO takes its lister's; mcplane, creation order, so the file does not flap).
 */
export function clusterScopePolicies(policies: readonly ClusterImagePolicy[]): Map<string, PolicyRequirement[]> {
  const out = new Map<string, PolicyRequirement[]>();
  for (const p of policies) {
    const requirement = sigstoreRequirement(p.spec.policy);
    for (const scope of p.spec.scopes) out.set(scope, [...(out.get(scope) ?? []), requirement]);
  }
  return out;
}

// ---- registries.d: sigstore attachments for the scopes and their mirrors ------------------------

/** sysregistriesv2 refMatchingPrefix: how much of `ref` `prefix` matches, or -1. */
function refMatchingPrefix(ref: string, prefix: string): number {
  if (prefix.startsWith('*.')) {
    let index = ref.indexOf(prefix.slice(1));
    if (index === -1 || ref.slice(0, index).includes('/')) return -1;
    index += prefix.length - 1;
    return index === ref.length || ':/@'.includes(ref[index]!) ? index : -1;
  }
  if (ref.length < prefix.length) return -1;
  if (ref.length === prefix.length) return ref === prefix ? prefix.length : -1;
  return ref.startsWith(prefix) && ':/@'.includes(ref[prefix.length]!) ? prefix.length : -1;
}

/** A registry's prefix once sysregistriesv2 has loaded it: its location when it has none. */
const prefixOf = (r: Registry): string => r.prefix || r.location;

/**
 * The registries as sysregistriesv2 holds them once loaded: one per prefix (the first in the file
 * wins) and sorted by prefix, which decides FindRegistry's ties ("*.example.com" and
 * "a.example.com" are as long: the first in this order wins).
 */
function loadedRegistries(conf: RegistriesConf): Registry[] {
  const byPrefix = new Map<string, Registry>();
  for (const r of conf.registries ?? []) if (!byPrefix.has(prefixOf(r))) byPrefix.set(prefixOf(r), r);
  return [...byPrefix.keys()].sort(compare).map((p) => byPrefix.get(p)!);
}

/** FindRegistry: the registry with the longest prefix matching `ref`, the first of equals. */
function findRegistry(registries: readonly Registry[], ref: string): Registry | undefined {
  let found: Registry | undefined;
  for (const r of registries) {
    if (refMatchingPrefix(ref, prefixOf(r)) !== -1 && prefixOf(r).length > (found ? prefixOf(found).length : 0)) found = r;
  }
  return found;
}

/**
 * A docker reference's repository name (reference.Named.Name()): `ref` without its tag and
 * digest. Throws where reference.ParseNamed refuses the reference: a name that is not canonical
 * (its first component no domain: no ".", ":" or "localhost") or whose path is not lowercase.
 */
function repositoryName(ref: string): string {
  const withoutDigest = ref.split('@')[0]!;
  const slash = withoutDigest.indexOf('/');
  if (slash === -1) throw new Error(`${ref}: repository name must be canonical`);
  const domain = withoutDigest.slice(0, slash);
  // A tag is a ":" in the last path component; a ":" in the domain is its port.
  const path = withoutDigest.slice(slash + 1).replace(/:[\w][\w.-]{0,127}$/, '');
  if (!domain.includes('.') && !domain.includes(':') && domain !== 'localhost') throw new Error(`${ref}: repository name must be canonical`);
  if (!/^[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*)*$/.test(path)) throw new Error(`${ref}: invalid reference format`);
  return `${domain}/${path}`;
}

const DUMMY_DIGEST = `sha256:${'a'.repeat(64)}`;
const DUMMY_TAG = 'aaa';
const DUMMY_PATH = '/a';
const DUMMY_PREFIX = 'matched';

/** addScopeMirrorsSigstoreRegistriesdConfig: every endpoint `reg` pulls `scope` from. */
function addScopeMirrors(scopes: Set<string>, scope: string, reg: Registry | undefined): void {
  if (!reg) return;
  let s = scope.startsWith('*.') ? scope.replace('*', DUMMY_PREFIX) : scope;
  let addedDummy = false;
  if (!s.includes('/')) {
    s += DUMMY_PATH;
    addedDummy = true;
  }
  const repo = repositoryName(s);
  const prefix = prefixOf(reg);
  for (const [ref, digested] of [[`${repo}@${DUMMY_DIGEST}`, true], [`${repo}:${DUMMY_TAG}`, false]] as const) {
    // PullSourcesFromReference: the mirrors this kind of reference may use, then the registry.
    const endpoints: RegistryEndpoint[] = reg.mirrorByDigestOnly
      ? (digested ? [...reg.mirrors] : [])
      : reg.mirrors.filter((m) => !(m.pullFromMirror === MIRROR_BY_DIGEST_ONLY && !digested) && !(m.pullFromMirror === MIRROR_BY_TAG_ONLY && digested));
    endpoints.push(reg);
    for (const ep of endpoints) {
      // An empty location is a wildcard registry's own: only its mirrors are added.
      if (ep.location === '') continue;
      const matched = refMatchingPrefix(ref, prefix);
      if (matched === -1) throw new Error(`invalid prefix '${prefix}' for reference '${ref}'`);
      let endpoint = repositoryName(ep.location + ref.slice(matched));
      if (addedDummy && endpoint.endsWith(DUMMY_PATH)) endpoint = endpoint.slice(0, -DUMMY_PATH.length);
      scopes.add(endpoint);
    }
  }
}

/**
 * generateSigstoreRegistriesdConfig: sigstore-registries.yaml, which has every policy scope, and
 * every mirror its images may be pulled from (found in the generated `registries` config), read
 * sigstore attachments; undefined when there is no scope. Throws a GenerateConfigError naming
 * `objectOf(scope)` where MCO's generation fails (a mirror that makes no valid reference).
 */
export function sigstoreRegistriesYaml(policyScopes: readonly string[], registries: RegistriesConf | undefined, objectOf: (scope: string) => string = () => KIND_CLUSTER_IMAGE_POLICY): string | undefined {
  if (policyScopes.length === 0) return undefined;
  const loaded = registries ? loadedRegistries(registries) : undefined;
  const scopes = new Set<string>();
  for (const policyScope of policyScopes) {
    scopes.add(policyScope);
    if (!loaded) continue;
    try {
      addScopeMirrors(scopes, policyScope, findRegistry(loaded, policyScope));
      for (const reg of loaded) {
        const scope = prefixOf(reg);
        if (scope !== policyScope && scopeIsNestedInsideScope(scope, policyScope)) addScopeMirrors(scopes, scope, findRegistry(loaded, scope));
      }
    } catch (err) {
      throw new GenerateConfigError([{ object: objectOf(policyScope), field: 'spec.scopes', rule: 'image-policy-mirrors', message: `error adding clusterimagepolicy scope ${policyScope} relevant mirrors: ${(err as Error).message}` }]);
    }
  }
  // ghodss/yaml: through JSON, then yaml.v2 (its key order and quoting).
  return stringifyGoYaml({ docker: Object.fromEntries([...scopes].map((s) => [s, { 'use-sigstore-attachments': true }])) });
}
