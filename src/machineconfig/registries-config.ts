// /etc/containers/registries.conf, policy.json and the search-registries drop-in, made from the
// cluster Image config and the mirror sets exactly as MCO makes them. Followed files (at
// machine-config-operator 7ff337a4):
//   pkg/controller/container-runtime-config/helpers.go: updateRegistriesConfig, updatePolicyJSON,
//     updateSearchRegistriesConfig, validateRegistriesConfScopes, the source/mirror regexes
//   pkg/controller/container-runtime-config/container_runtime_config_controller.go:
//     registriesConfigIgnition (which files, when)
//   vendor/github.com/openshift/runtime-utils/pkg/registries/registries.go: EditRegistriesConfig,
//     ScopeIsNestedInsideScope, the merged mirror sets; topo.go: the mirror order
//   vendor/github.com/containers/image/v5/pkg/sysregistriesv2/system_registries_v2.go: the
//     V2RegistriesConf fields, their TOML names and which are omitempty (the encoder's layout)
// What mcplane leaves out: the release payload (mcplane has no release image, so blocking the
// payload's registry is not special-cased). The sigstore image policies (ClusterImagePolicy) are
// image-policy.ts's; they reach policy.json here as requirements by scope.

import { GenerateConfigError, TomlSyntaxError, type Problem } from './errors.ts';
import { encodeToml, parseToml, type TomlTable, type TomlValue } from './toml.ts';

export const REGISTRIES_CONF_PATH = '/etc/containers/registries.conf';
export const POLICY_JSON_PATH = '/etc/containers/policy.json';
export const SEARCH_REGISTRIES_DROPIN_PATH = '/etc/containers/registries.conf.d/01-image-searchRegistries.conf';

export const MIRROR_BY_DIGEST_ONLY = 'digest-only';
export const MIRROR_BY_TAG_ONLY = 'tag-only';

export type MirrorSourcePolicy = '' | 'AllowContactingSource' | 'NeverContactSource';

/** One source and its mirrors, as ImageDigestMirrorSet/ImageTagMirrorSet spell them (ICSP: policy ""). */
export interface MirrorRule {
  source: string;
  mirrors: string[];
  mirrorSourcePolicy: MirrorSourcePolicy;
}

/** config.openshift.io/v1 Image "cluster": spec.registrySources. Absent lists stay undefined (Go's nil). */
export interface RegistrySources {
  insecureRegistries?: string[];
  blockedRegistries?: string[];
  allowedRegistries?: string[];
  containerRuntimeSearchRegistries?: string[];
}

export interface RegistriesInput {
  registrySources: RegistrySources;
  /** ImageDigestMirrorSets' spec.imageDigestMirrors, in the order MCO lists the objects (by name). */
  digestMirrors: MirrorRule[];
  /** ImageTagMirrorSets' spec.imageTagMirrors. */
  tagMirrors: MirrorRule[];
  /** ImageContentSourcePolicies' spec.repositoryDigestMirrors (merged after the IDMS rules, as MCO does). */
  icspMirrors: MirrorRule[];
  /** The ClusterImagePolicies' sigstore requirements by scope (image-policy.ts clusterScopePolicies). */
  scopePolicies?: ReadonlyMap<string, PolicyRequirement[]>;
}

// ---- sysregistriesv2.V2RegistriesConf --------------------------------------------------------

export interface RegistryEndpoint {
  location: string;
  insecure: boolean;
  pullFromMirror: string;
}

export interface Registry extends RegistryEndpoint {
  prefix: string;
  mirrors: RegistryEndpoint[];
  blocked: boolean;
  mirrorByDigestOnly: boolean;
}

export interface RegistriesConf {
  registries?: Registry[];
  unqualifiedSearchRegistries?: string[];
  credentialHelpers?: string[];
  shortNameMode: string;
  additionalLayerStoreAuthHelper: string;
  aliases?: Record<string, string>;
}

/** Reads registries.conf into V2RegistriesConf as BurntSushi's Decode does (unknown keys ignored). */
export function decodeRegistriesConf(text: string): RegistriesConf {
  const t = parseToml(text);
  const str = (v: TomlValue | undefined, where: string): string => {
    if (v === undefined) return '';
    if (typeof v !== 'string') throw new TomlSyntaxError(`${where} must be a string`);
    return v;
  };
  const bool = (v: TomlValue | undefined, where: string): boolean => {
    if (v === undefined) return false;
    if (typeof v !== 'boolean') throw new TomlSyntaxError(`${where} must be true or false`);
    return v;
  };
  const strings = (v: TomlValue | undefined, where: string): string[] | undefined => {
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new TomlSyntaxError(`${where} must be a list of strings`);
    return v as string[];
  };
  const tables = (v: TomlValue | undefined, where: string): TomlTable[] => {
    if (v === undefined) return [];
    if (!Array.isArray(v) || !v.every((x) => x !== null && typeof x === 'object' && !Array.isArray(x))) throw new TomlSyntaxError(`${where} must be an array of tables`);
    return v as TomlTable[];
  };
  const endpoint = (e: TomlTable, where: string): RegistryEndpoint => ({
    location: str(e.location, `${where}.location`),
    insecure: bool(e.insecure, `${where}.insecure`),
    pullFromMirror: str(e['pull-from-mirror'], `${where}.pull-from-mirror`),
  });
  const out: RegistriesConf = { shortNameMode: str(t['short-name-mode'], 'short-name-mode'), additionalLayerStoreAuthHelper: str(t['additional-layer-store-auth-helper'], 'additional-layer-store-auth-helper') };
  if (t.registry !== undefined) {
    out.registries = tables(t.registry, 'registry').map((r, i) => ({
      prefix: str(r.prefix, `registry[${i}].prefix`),
      ...endpoint(r, `registry[${i}]`),
      mirrors: tables(r.mirror, `registry[${i}].mirror`).map((m, j) => endpoint(m, `registry[${i}].mirror[${j}]`)),
      blocked: bool(r.blocked, `registry[${i}].blocked`),
      mirrorByDigestOnly: bool(r['mirror-by-digest-only'], `registry[${i}].mirror-by-digest-only`),
    }));
  }
  const search = strings(t['unqualified-search-registries'], 'unqualified-search-registries');
  if (search) out.unqualifiedSearchRegistries = search;
  const helpers = strings(t['credential-helpers'], 'credential-helpers');
  if (helpers) out.credentialHelpers = helpers;
  if (t.aliases !== undefined) {
    const a = t.aliases;
    if (a === null || typeof a !== 'object' || Array.isArray(a)) throw new TomlSyntaxError('aliases must be a table');
    out.aliases = Object.fromEntries(Object.entries(a).map(([k, v]) => [k, str(v, `aliases.${k}`)]));
  }
  return out;
}

/** Encodes V2RegistriesConf as BurntSushi's Encoder does: the struct's field order, omitempty fields left out when empty. */
export function encodeRegistriesConf(conf: RegistriesConf): string {
  const endpoint = (e: RegistryEndpoint): TomlTable => ({
    location: e.location || undefined,
    insecure: e.insecure || undefined,
    'pull-from-mirror': e.pullFromMirror || undefined,
  });
  const doc: TomlTable = {
    registry: conf.registries?.map((r) => ({
      prefix: r.prefix,
      ...endpoint(r),
      mirror: r.mirrors.length ? r.mirrors.map(endpoint) : undefined,
      blocked: r.blocked || undefined,
      'mirror-by-digest-only': r.mirrorByDigestOnly || undefined,
    })),
    'unqualified-search-registries': conf.unqualifiedSearchRegistries,
    'credential-helpers': conf.credentialHelpers,
    'short-name-mode': conf.shortNameMode,
    'additional-layer-store-auth-helper': conf.additionalLayerStoreAuthHelper,
    // A Go map: BurntSushi writes its keys sorted.
    aliases: conf.aliases ? Object.fromEntries(Object.entries(conf.aliases).sort(([a], [b]) => compare(a, b))) : undefined,
  };
  return encodeToml(doc);
}

/** Go's string order (sort.Strings): by bytes, which UTF-16 code units order alike for ASCII. */
export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// ---- runtime-utils/pkg/registries ------------------------------------------------------------

/** ScopeIsNestedInsideScope: whether subScope (a registry prefix or location) lies inside superScope. */
export function scopeIsNestedInsideScope(subScope: string, superScope: string): boolean {
  if (superScope === subScope) return true;
  if (subScope.length > superScope.length && subScope.startsWith(superScope) && subScope[superScope.length] === '/') return true;
  if (superScope.startsWith('*.')) {
    if (subScope.includes(':')) {
      const host = subScope.split(':')[0]!;
      return host.endsWith(superScope.slice(1)) && !host.includes('/');
    }
    return subScope.split('/')[0]!.endsWith(superScope.slice(1));
  }
  return false;
}

/** IsValidRegistriesConfScope: a wildcard only as a leading "*." of a host name. */
export function isValidRegistriesConfScope(scope: string): boolean {
  if (scope === '') return false;
  if (!scope.includes('*')) return true;
  return scope.startsWith('*.') && !/[/@:*]/.test(scope.slice(2));
}

/** topoGraph.Sorted from runtime-utils' topo.go: Kahn's algorithm, ties and loops broken by name. */
function topoSorted(edges: [string, string][]): string[] {
  interface TopoNode { name: string; used: boolean; ins: Set<TopoNode>; outs: Set<TopoNode> }
  const nodes = new Map<string, TopoNode>();
  const node = (name: string): TopoNode => {
    let n = nodes.get(name);
    if (!n) nodes.set(name, (n = { name, used: false, ins: new Set(), outs: new Set() }));
    return n;
  };
  for (const [from, to] of edges) {
    const f = node(from);
    const t = node(to);
    f.outs.add(t);
    t.ins.add(f);
  }
  const all = [...nodes.values()].sort((a, b) => compare(a.name, b.name));
  const queue = all.filter((n) => n.ins.size === 0);
  const res: string[] = [];
  let index = 0;
  while (queue.length > 0 || index < all.length) {
    let n: TopoNode;
    if (queue.length > 0) n = queue.shift()!;
    else {
      n = all[index++]!;
      if (n.used) continue;
    }
    n.used = true;
    res.push(n.name);
    const next: TopoNode[] = [];
    // Go ranges over a map here; the batch is sorted before use, so its order does not matter.
    for (const out of n.outs) {
      out.ins.delete(n);
      if (out.ins.size === 0 && !out.used) next.push(out);
    }
    next.sort((a, b) => compare(a.name, b.name));
    queue.push(...next);
  }
  return res;
}

interface MergedMirrorSet {
  source: string;
  mirrors: string[];
  neverContactSource: boolean;
}

/** mirrorSets.addMirrorSet + mergedMirrorSets: one entry per source, sorted by source. */
function mergedMirrorSets(rules: MirrorRule[]): MergedMirrorSet[] {
  const disjoint = new Map<string, string[][]>();
  const blockSource = new Set<string>();
  for (const rule of rules) {
    // No mirrors, or only the source itself, is not a mirror set; its policy is ignored too.
    if (!rule.mirrors.some((m) => m !== rule.source)) continue;
    if (rule.mirrorSourcePolicy === 'NeverContactSource') blockSource.add(rule.source);
    if (!disjoint.has(rule.source)) disjoint.set(rule.source, []);
    disjoint.get(rule.source)!.push([...rule.mirrors]);
  }
  return [...disjoint.keys()].sort(compare).map((source) => {
    const edges: [string, string][] = [];
    for (const mirrors of disjoint.get(source)!) {
      for (let i = 0; i + 1 < mirrors.length; i++) edges.push([mirrors[i]!, mirrors[i + 1]!]);
      if (!mirrors.includes(source)) edges.push([mirrors[mirrors.length - 1]!, source]);
    }
    let sorted = topoSorted(edges);
    // The source is tried last anyway (sysregistriesv2's semantics), so it is not listed.
    if (sorted[sorted.length - 1] === source) sorted = sorted.slice(0, -1);
    return { source, mirrors: sorted, neverContactSource: blockSource.has(source) };
  });
}

const registryScope = (r: Registry): string => (r.prefix !== '' ? r.prefix : r.location);

/**
 * EditRegistriesConfig, in place: insecure and blocked scopes, then the mirrors (digest-only, then
 * tag-only). Returns the error EditRegistriesConfig returns, which leaves the pool's registries
 * config as it was: a mirror set whose source is a wildcard with an insecure or blocked scope
 * inside it, whose mirrors cannot be carried down to that scope (mirrorsAdjustedForNestedScope).
 */
export function editRegistriesConfig(conf: RegistriesConf, insecureScopes: string[], blockedScopes: string[], input: RegistriesInput): string | undefined {
  const registries = (conf.registries ??= []);
  const entry = (scope: string): Registry => {
    const found = registries.find((r) => registryScope(r) === scope);
    if (found) return found;
    const r: Registry = { prefix: '', location: '', insecure: false, pullFromMirror: '', mirrors: [], blocked: false, mirrorByDigestOnly: false };
    if (scope.startsWith('*.')) r.prefix = scope;
    else r.location = scope;
    registries.push(r);
    return r;
  };
  const addMirrors = (sets: MergedMirrorSet[], pullFromMirror: string): void => {
    for (const set of sets) {
      const reg = entry(set.source);
      if (set.neverContactSource) reg.blocked = true;
      for (const m of set.mirrors) reg.mirrors.push({ location: m, insecure: false, pullFromMirror });
    }
  };
  const digestSets = mergedMirrorSets([...input.digestMirrors, ...input.icspMirrors.map((r) => ({ ...r, mirrorSourcePolicy: '' as const }))]);
  addMirrors(digestSets, MIRROR_BY_DIGEST_ONLY);
  const tagSets = mergedMirrorSets(input.tagMirrors);
  addMirrors(tagSets, MIRROR_BY_TAG_ONLY);

  // Blocked entries first, so a blocked sub-scope of an insecure scope gets insecure too.
  for (const scope of blockedScopes) entry(scope);
  // Only the most precise match applies in registries.conf: carry the flags down to sub-scopes.
  for (const insecure of insecureScopes) {
    entry(insecure).insecure = true;
    for (const reg of registries) {
      if (scopeIsNestedInsideScope(registryScope(reg), insecure)) reg.insecure = true;
      for (const m of reg.mirrors) if (scopeIsNestedInsideScope(m.location, insecure)) m.insecure = true;
    }
  }
  for (const blocked of blockedScopes) {
    entry(blocked).blocked = true;
    for (const reg of registries) if (scopeIsNestedInsideScope(registryScope(reg), blocked)) reg.blocked = true;
  }
  // A more precise scope with no mirrors of its own would hide the source's mirrors: copy them down.
  for (const set of [...digestSets, ...tagSets]) {
    const mirrored = entry(set.source);
    const mirroredScope = registryScope(mirrored);
    for (const reg of registries) {
      const scope = registryScope(reg);
      if (scope !== mirroredScope && scopeIsNestedInsideScope(scope, mirroredScope) && reg.mirrors.length === 0) {
        if (mirroredScope.startsWith('*.')) {
          return `the mirrors of ${mirroredScope} cannot be carried down to ${scope}, a more specific scope inside it (an insecure or blocked registry of the Image config, or an entry of the pool's registries.conf): a wildcard source's mirrors apply to no single repository (runtime-utils mirrorsAdjustedForNestedScope refuses a wildcard scope); give the mirrors for a registry or repository source instead`;
        }
        const adjustment = scope.slice(mirroredScope.length);
        reg.mirrors = mirrored.mirrors.map((m) => ({ ...m, location: m.location + adjustment }));
      }
    }
  }
  return undefined;
}

// ---- validation (validateRegistriesConfScopes) ------------------------------------------------

// The CRD's patterns for IDMS/ITMS, which MCO re-checks because ICSP's CRD has none.
const SOURCE_RE = /^\*(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+$|^((?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?)(?:(?:\/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?$/;
const MIRROR_RE = /^((?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?)(?:(?:\/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?$/;

export const isValidMirrorSource = (s: string): boolean => SOURCE_RE.test(s);
export const isValidMirror = (s: string): boolean => MIRROR_RE.test(s);

/** A mirror rule with the object and field it came from, for problems. */
export interface LocatedMirrorRule extends MirrorRule {
  object: string;
  field: string;
}

/**
 * validateRegistriesConfScopes: valid scopes, valid sources and mirrors, one mirrorSourcePolicy
 * per source across every IDMS, ITMS and ICSP, and no NeverContactSource whose mirrors include the
 * source. Every problem is returned (MCO stops at the first).
 */
export function registriesProblems(image: { object: string; sources: RegistrySources }, rules: LocatedMirrorRule[]): Problem[] {
  const problems: Problem[] = [];
  const lists: [keyof RegistrySources, string][] = [['insecureRegistries', 'insecure'], ['blockedRegistries', 'blocked'], ['allowedRegistries', 'allowed']];
  for (const [key, word] of lists) {
    (image.sources[key] ?? []).forEach((scope, i) => {
      if (!isValidRegistriesConfScope(scope)) problems.push({ object: image.object, field: `spec.registrySources.${key}[${i}]`, rule: 'registry-scope', message: `invalid entry for ${word} registries ${JSON.stringify(scope)}: a registry, namespace or repository, or a host wildcard "*.example.com"` });
    });
  }
  if (image.sources.allowedRegistries?.length && image.sources.blockedRegistries?.length) {
    problems.push({ object: image.object, field: 'spec.registrySources', rule: 'allowed-and-blocked', message: 'invalid images config: only one of AllowedRegistries or BlockedRegistries may be specified' });
  }
  const policyOf = new Map<string, { policy: string; where: string }>();
  for (const r of rules) {
    if (!isValidMirrorSource(r.source)) problems.push({ object: r.object, field: `${r.field}.source`, rule: 'mirror-source-format', message: `invalid format for source ${JSON.stringify(r.source)}` });
    const policy = r.mirrorSourcePolicy || 'AllowContactingSource';
    const seen = policyOf.get(r.source);
    if (seen && seen.policy !== policy) {
      problems.push({ object: r.object, field: `${r.field}.mirrorSourcePolicy`, rule: 'conflicting-mirror-source-policy', message: `conflicting mirrorSourcePolicy is set for the same source ${JSON.stringify(r.source)} in imagedigestmirrorsets, imagetagmirrorsets, or imagecontentsourcepolicies (${seen.where} has ${seen.policy})` });
    } else if (!seen) policyOf.set(r.source, { policy, where: r.object });
    r.mirrors.forEach((m, i) => {
      if (!isValidMirror(m)) problems.push({ object: r.object, field: `${r.field}.mirrors[${i}]`, rule: 'mirror-format', message: `invalid format for mirror ${JSON.stringify(m)}` });
      if (policy === 'NeverContactSource' && m === r.source) problems.push({ object: r.object, field: `${r.field}.mirrors[${i}]`, rule: 'never-contact-source-mirror', message: `cannot set mirrorSourcePolicy: NeverContactSource if the source ${JSON.stringify(r.source)} is one of the mirrors` });
    });
  }
  return problems;
}

// ---- policy.json (updatePolicyJSON) -----------------------------------------------------------

/** One requirement of policy.json (containers-policy.json(5)), as JSON. */
export type PolicyRequirement = Record<string, unknown>;

/**
 * updatePolicyJSON: policy.json for allowed (everything else rejected) or blocked registries and
 * the ClusterImagePolicies' requirements by scope: the docker transport's scopes replaced, and
 * atomic's with them (atomic takes no scope of three or more segments). An allowed registry that
 * is also a policy's scope gets only the policy's requirements, not insecureAcceptAnything.
 */
export function updatePolicyJson(base: string, blocked: string[] | undefined, allowed: string[] | undefined, scopePolicies: ReadonlyMap<string, PolicyRequirement[]> = new Map()): string {
  const policy = JSON.parse(base) as { default?: PolicyRequirement[]; transports?: Record<string, Record<string, PolicyRequirement[]>> };
  if (policy === null || typeof policy !== 'object' || Array.isArray(policy)) throw new TomlSyntaxError('policy.json is not a JSON object');
  const transports = policy.transports ?? {};
  const scopes: Record<string, PolicyRequirement[]> = {};
  let def = policy.default ?? [];
  if (allowed?.length) {
    def = [{ type: 'reject' }];
    for (const reg of allowed) if (!scopePolicies.has(reg)) scopes[reg] = [{ type: 'insecureAcceptAnything' }];
  }
  if (blocked?.length) {
    def = [{ type: 'insecureAcceptAnything' }];
    for (const reg of blocked) scopes[reg] = [{ type: 'reject' }];
  }
  for (const [scope, requirements] of scopePolicies) scopes[scope] = [...(scopes[scope] ?? []), ...requirements];
  if (Object.keys(scopes).length > 0) {
    transports.docker = scopes;
    transports.atomic = Object.fromEntries(Object.entries(scopes).filter(([reg]) => (reg.match(/\//g) ?? []).length < 3));
  }
  return goJsonIndent({ default: def, transports: sortMaps(transports) });
}

/**
 * Go's json.MarshalIndent(v, "", "  "): fields in order, map keys sorted (done by the caller),
 * two-space indent, and Go's HTML-safe escapes (&, <, > and the line and paragraph separators),
 * so an OIDC issuer with a query string is written byte for byte as MCO writes it.
 */
function goJsonIndent(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(/[&<>\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * validateImagePolicyWithAllowedBlockedRegistries, for the cluster's policies: a policy's scope
 * must lie inside an allowed registry when registries are allowed, and outside every blocked
 * one; the first scope that does not, in MCO's words, or undefined.
 */
export function scopePolicyConflict(scopes: Iterable<string>, allowed: readonly string[], blocked: readonly string[]): string | undefined {
  for (const scope of scopes) {
    if (allowed.length > 0 && !allowed.some((reg) => scopeIsNestedInsideScope(scope, reg))) return `clusterimagePolicy configured for the scope ${scope} is not nested inside allowedRegistries`;
  }
  for (const scope of scopes) {
    if (blocked.some((reg) => scopeIsNestedInsideScope(scope, reg))) return `clusterimagePolicy configured for the scope ${scope} is nested inside blockedRegistries`;
  }
  return undefined;
}

function sortMaps(m: Record<string, Record<string, PolicyRequirement[]>>): Record<string, Record<string, PolicyRequirement[]>> {
  return Object.fromEntries(Object.keys(m).sort(compare).map((k) => [k, Object.fromEntries(Object.keys(m[k]!).sort(compare).map((s) => [s, m[k]![s]!]))]));
}

// ---- the generated files (registriesConfigIgnition) ------------------------------------------

export interface GeneratedFile {
  path: string;
  contents: string;
}

export interface RegistriesBase {
  /** The pool's registries.conf from its other configs; undefined when none provides one. */
  registriesConf?: string;
  policyJson?: string;
}

/**
 * The files of `99-<pool>-generated-registries`, in MCO's order: registries.conf when anything
 * edits it, policy.json when registries are allowed or blocked, and the search-registries
 * drop-in when search registries are set. `object` names the Image config in problems.
 */
export function generateRegistriesFiles(base: RegistriesBase, input: RegistriesInput, object: string): GeneratedFile[] {
  const src = input.registrySources;
  const files: GeneratedFile[] = [];
  const fail = (field: string, rule: string, message: string): never => {
    throw new GenerateConfigError([{ object, field, rule, message }]);
  };
  if (src.insecureRegistries !== undefined || src.blockedRegistries?.length || input.digestMirrors.length || input.tagMirrors.length || input.icspMirrors.length) {
    if (base.registriesConf === undefined) fail('spec', 'base-config-missing', `no MachineConfig of the pool provides ${REGISTRIES_CONF_PATH} to edit (MCO takes it from its templates; import or apply the pool's 01-<pool>-container-runtime config)`);
    let conf: RegistriesConf;
    try {
      conf = decodeRegistriesConf(base.registriesConf!);
    } catch (err) {
      if (err instanceof TomlSyntaxError) return fail('spec', 'base-config-syntax', `error unmarshalling registries config ${REGISTRIES_CONF_PATH}: ${err.message}`);
      throw err;
    }
    const refused = editRegistriesConfig(conf, src.insecureRegistries ?? [], src.blockedRegistries ?? [], input);
    if (refused !== undefined) fail('spec.registrySources', 'wildcard-mirror-nested-scope', `could not edit ${REGISTRIES_CONF_PATH}: ${refused}`);
    files.push({ path: REGISTRIES_CONF_PATH, contents: encodeRegistriesConf(conf) });
  }
  // Go's append of an empty list to nil stays nil: an empty allowed list changes nothing.
  const scopePolicies = input.scopePolicies ?? new Map<string, PolicyRequirement[]>();
  if (src.blockedRegistries?.length || src.allowedRegistries?.length || scopePolicies.size > 0) {
    if (src.allowedRegistries?.length && src.blockedRegistries?.length) fail('spec.registrySources', 'allowed-and-blocked', 'invalid images config: only one of AllowedRegistries or BlockedRegistries may be specified');
    const conflict = scopePolicyConflict(scopePolicies.keys(), src.allowedRegistries ?? [], src.blockedRegistries ?? []);
    if (conflict !== undefined) fail('spec.registrySources', 'image-policy-scope', `could not update policy json with new changes: ${conflict}`);
    if (base.policyJson === undefined) fail('spec', 'base-config-missing', `no MachineConfig of the pool provides ${POLICY_JSON_PATH} to edit (MCO takes it from its templates)`);
    try {
      files.push({ path: POLICY_JSON_PATH, contents: updatePolicyJson(base.policyJson!, src.blockedRegistries, src.allowedRegistries, scopePolicies) });
    } catch (err) {
      if (err instanceof SyntaxError || err instanceof TomlSyntaxError) fail('spec', 'base-config-syntax', `error decoding policy json ${POLICY_JSON_PATH}: ${err.message}`);
      throw err;
    }
  }
  if (src.containerRuntimeSearchRegistries !== undefined) {
    files.push({ path: SEARCH_REGISTRIES_DROPIN_PATH, contents: encodeRegistriesConf({ unqualifiedSearchRegistries: src.containerRuntimeSearchRegistries, shortNameMode: '', additionalLayerStoreAuthHelper: '' }) });
  }
  return files;
}
