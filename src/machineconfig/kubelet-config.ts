// KubeletConfig (machineconfiguration.openshift.io/v1): validated and made into the files of
// `99-<pool>-generated-kubelet[-N]` as MCO makes them. Followed files (machine-config-operator
// 7ff337a4): pkg/controller/kubelet-config/helpers.go (validateUserKubeletConfig,
// validateStaticPodPathGivenPool, generateKubeletIgnFiles, getManagedKubeletConfigKey,
// createNewKubeletLogLevelIgnition, createNewKubeletDynamicSystemReservedIgnition) and
// kubelet_config_controller.go (syncKubeletConfig: which pools, the file order, the conditions,
// the tlsSecurityProfile override; the profile tables are in tls-profile.ts).
//
// MCO's base is the kubelet.conf its templates render for the pool (with the cluster's feature
// gates and the APIServer/cluster TLS profile, Intermediate without one). mcplane has no
// templates: the base is the /etc/kubernetes/kubelet.conf the pool's other MachineConfigs provide
// (an imported 01-worker-kubelet, say), which the cluster's MCO rendered with that same profile,
// so a KubeletConfig without tlsSecurityProfile keeps the base's tlsMinVersion/tlsCipherSuites.

import { parse as parseYaml } from 'yaml';
import { stringifyGoYaml } from './go-yaml.ts';
import { API_VERSION, MASTER_POOL } from './constants.ts';
import { GenerateConfigError, type Problem } from './errors.ts';
import { matchesSelector, parseLabelSelector } from './label-selector.ts';
import { checkApiVersion, parseObjectMeta } from './object-meta.ts';
import { decodeKubeletConfiguration, encodeKubeletConfiguration, KUBELET_FIELD_TRAITS } from './kubelet-configuration.ts';
import { isRecord, ProblemCollector } from './problem-collector.ts';
import { parseTLSSecurityProfile, securityProfileCiphers, type TLSSecurityProfile } from './tls-profile.ts';
import type { GeneratedFile } from './registries-config.ts';
import type { LabelSelector, MachineConfigPool, ObjectMeta } from './types.ts';

export const KIND_KUBELET_CONFIG = 'KubeletConfig';
export const KUBELET_CONF_PATH = '/etc/kubernetes/kubelet.conf';
export const KUBELET_LOGGING_DROPIN_PATH = '/etc/systemd/system/kubelet.service.d/20-logging.conf';
export const NODE_SIZING_ENV_PATH = '/etc/node-sizing-enabled.env';
/** ctrlcommon.MCNameSuffixAnnotationKey: which `-N` a KubeletConfig's (or ContainerRuntimeConfig's) MachineConfig takes. */
export const MC_NAME_SUFFIX_ANNOTATION = 'machineconfiguration.openshift.io/mc-name-suffix';
/** ctrlcommon.MaxMCNameSuffix: suffixes go up to 9, so ten configs per pool. */
export const MAX_MC_NAME_SUFFIX = 9;

export interface KubeletConfigSpec {
  /** Null or empty selects no pool (MCO's rule). */
  machineConfigPoolSelector: LabelSelector | null;
  /** The KubeletConfiguration fields to merge over the base, as given. */
  kubeletConfig?: Record<string, unknown>;
  logLevel?: number;
  autoSizingReserved?: boolean;
  /** Replaces the base's tlsMinVersion and tlsCipherSuites (before kubeletConfig is merged over). */
  tlsSecurityProfile?: TLSSecurityProfile;
}

export interface KubeletConfig {
  apiVersion: string;
  kind: typeof KIND_KUBELET_CONFIG;
  metadata: ObjectMeta;
  spec: KubeletConfigSpec;
}

const SPEC_KEYS = ['machineConfigPoolSelector', 'kubeletConfig', 'logLevel', 'autoSizingReserved', 'tlsSecurityProfile'];

/** validateUserKubeletConfig's refusals: fields the MCO owns, which would leave a node unable to come back. */
const REFUSED_FIELDS: { field: string; isSet: (kc: Record<string, unknown>) => boolean }[] = [
  { field: 'cgroupDriver', isSet: (kc) => typeof kc.cgroupDriver === 'string' && kc.cgroupDriver !== '' },
  { field: 'clusterDNS', isSet: (kc) => Array.isArray(kc.clusterDNS) && kc.clusterDNS.length > 0 },
  { field: 'clusterDomain', isSet: (kc) => typeof kc.clusterDomain === 'string' && kc.clusterDomain !== '' },
  { field: 'featureGates', isSet: (kc) => isRecord(kc.featureGates) && Object.keys(kc.featureGates).length > 0 },
  { field: 'failSwapOn', isSet: (kc) => kc.failSwapOn !== undefined && kc.failSwapOn !== null },
  { field: 'memorySwap.swapBehavior', isSet: (kc) => isRecord(kc.memorySwap) && typeof kc.memorySwap.swapBehavior === 'string' && kc.memorySwap.swapBehavior !== '' },
];

/** Validates a KubeletConfig document with MCO's rules; every problem goes into `c`. */
export function parseKubeletConfig(doc: Record<string, unknown>, c: ProblemCollector): KubeletConfig | undefined {
  checkApiVersion(doc, c);
  const metadata = parseObjectMeta(doc.metadata, c);
  const spec = c.record(doc.spec, 'spec') ?? {};
  c.onlyKeys(spec, 'spec', SPEC_KEYS);
  const machineConfigPoolSelector = parseLabelSelector(spec.machineConfigPoolSelector, c, 'spec.machineConfigPoolSelector');
  const out: KubeletConfigSpec = { machineConfigPoolSelector };
  const logLevel = c.integer(spec.logLevel, 'spec.logLevel');
  if (logLevel !== undefined) {
    if (logLevel < 0 || logLevel > 10) c.add('spec.logLevel', 'log-level-range', `KubeletConfig's LogLevel is not valid [0,10]: ${logLevel}`);
    out.logLevel = logLevel;
  }
  const auto = c.boolean(spec.autoSizingReserved, 'spec.autoSizingReserved');
  if (auto !== undefined) out.autoSizingReserved = auto;
  const tls = parseTLSSecurityProfile(spec.tlsSecurityProfile, c, 'spec.tlsSecurityProfile');
  if (tls) out.tlsSecurityProfile = tls;
  const raw = c.record(spec.kubeletConfig, 'spec.kubeletConfig');
  if (raw) {
    // Stored as given, so that it reads back as applied; checked, as MCO checks it, decoded.
    out.kubeletConfig = raw;
    const { value: kc, ignored } = decodeKubeletConfiguration(raw, c, 'spec.kubeletConfig');
    // Kept in the stored object, as applied; left out of kubelet.conf without a word from MCO.
    for (const key of ignored) c.warn(`${c.object}: spec.kubeletConfig.${key} is not a KubeletConfiguration field, so it is left out of kubelet.conf (as MCO leaves it out); check its spelling`);
    for (const r of REFUSED_FIELDS) {
      if (r.isSet(kc)) c.add(`spec.kubeletConfig.${r.field}`, 'kubelet-field-refused', `KubeletConfiguration: ${r.field.replace('memorySwap.', '')} is not allowed to be set, but contains: ${JSON.stringify(r.field === 'memorySwap.swapBehavior' ? (kc.memorySwap as Record<string, unknown>).swapBehavior : kc[r.field])}`);
    }
    if (isRecord(kc.systemReserved) && Object.keys(kc.systemReserved).length > 0 && auto === true) {
      c.add('spec.autoSizingReserved', 'auto-sizing-and-system-reserved', 'KubeletConfiguration: autoSizingReserved and systemdReserved cannot be set together');
    }
    if (typeof kc.systemReservedCgroup === 'string' && kc.systemReservedCgroup !== '' && typeof kc.systemCgroups === 'string' && kc.systemCgroups !== '' && kc.systemReservedCgroup !== kc.systemCgroups) {
      c.add('spec.kubeletConfig.systemReservedCgroup', 'system-reserved-cgroup', `KubeletConfiguration: systemReservedCgroup (${kc.systemReservedCgroup}) must match systemCgroups (${kc.systemCgroups})`);
    }
  }
  if (!metadata || !c.ok) return undefined;
  return { apiVersion: API_VERSION, kind: KIND_KUBELET_CONFIG, metadata, spec: out };
}

/** getPoolsForKubeletConfig (and the ContainerRuntimeConfig twin): an empty selector matches nothing. */
export function poolsSelectedBy(selector: LabelSelector | null, pools: readonly MachineConfigPool[]): MachineConfigPool[] {
  const empty = !selector || ((!selector.matchLabels || Object.keys(selector.matchLabels).length === 0) && !selector.matchExpressions?.length);
  if (empty) return [];
  return pools.filter((p) => matchesSelector(selector, p.metadata.labels));
}

/** isControlPlanePool: master or arbiter by name, or a nodeSelector on the master role label. */
function isControlPlanePool(pool: MachineConfigPool): boolean {
  const name = pool.metadata.name;
  if (name === MASTER_POOL || name === 'arbiter') return true;
  const sel = pool.spec.nodeSelector;
  if (!sel) return false;
  const MASTER_LABEL = 'node-role.kubernetes.io/master';
  if (sel.matchLabels && MASTER_LABEL in sel.matchLabels) return true;
  return (sel.matchExpressions ?? []).some((e) => e.key === MASTER_LABEL && (e.operator === 'Exists' || e.operator === 'In'));
}

// How mergo.Merge(base, spec, WithOverride) treats a value (KUBELET_FIELD_TRAITS): Go maps merge
// key by key (every key of the spec wins, "" too); pointer fields take a zero value when the base
// has none; a zero scalar or a zero duration never overrides a set one. Both sides are decoded
// first, so a zero duration is written "0s".
const { maps: MAP_FIELDS, pointers: POINTER_FIELDS, durations: DURATION_FIELDS } = KUBELET_FIELD_TRAITS;
const clone = <T>(v: T): T => structuredClone(v);

function isZeroScalar(key: string, v: unknown): boolean {
  return v === false || v === 0 || v === '' || (DURATION_FIELDS.has(key) && v === '0s');
}

/** mergo.Merge(dst, src, mergo.WithOverride) on the JSON form of KubeletConfiguration. */
function mergeOver(dst: Record<string, unknown>, src: Record<string, unknown>, top: boolean): void {
  for (const [k, s] of Object.entries(src)) {
    if (s === null || s === undefined) continue;
    const d = dst[k];
    if (top && MAP_FIELDS.has(k) && isRecord(s)) {
      dst[k] = { ...(isRecord(d) ? d : {}), ...clone(s) };
    } else if (isRecord(s)) {
      if (isRecord(d)) mergeOver(d, s, false);
      else dst[k] = clone(s);
    } else if (Array.isArray(s)) {
      if (s.length > 0) dst[k] = clone(s);
    } else if (!isZeroScalar(k, s)) {
      dst[k] = s;
    } else if (d === undefined && (!top || POINTER_FIELDS.has(k))) {
      // A nil pointer in the base takes the spec's pointer, zero or not.
      dst[k] = s;
    }
  }
}

const SYSTEM_RESERVED_ENFORCEMENT = ['system-reserved', 'system-reserved-compressible'];
const PODS_ENFORCEMENT = 'pods';

/**
 * generateKubeletIgnFiles for one pool, plus the static-pod check for it: the node-sizing env
 * file (autoSizingReserved, or systemReserved's memory/cpu/ephemeral-storage), the logging
 * drop-in (logLevel), and the whole kubelet.conf (the base with the spec merged over it), in
 * MCO's order. `baseKubeletConf` is undefined when none of the pool's configs provides one.
 */
export function generateKubeletFiles(kc: KubeletConfig, pool: MachineConfigPool, baseKubeletConf: string | undefined): GeneratedFile[] {
  const object = `${KIND_KUBELET_CONFIG}/${kc.metadata.name}`;
  const fail = (field: string, rule: string, message: string): never => {
    throw new GenerateConfigError([{ object, field, rule, message } satisfies Problem]);
  };
  const raw = kc.spec.kubeletConfig;
  // DecodeKubeletConfig: the spec as the typed struct holds it (Apply refused what does not decode).
  const spec = raw ? decodeOrThrow(raw, object, 'spec.kubeletConfig') : undefined;
  if (raw && spec) {
    if (isControlPlanePool(pool)) {
      // MCO looks for the key in the raw JSON here, not in the decoded struct.
      if ('staticPodPath' in raw) fail('spec.kubeletConfig.staticPodPath', 'static-pod-path', `KubeletConfiguration: staticPodPath is not allowed to be set for control plane pool "${pool.metadata.name}"`);
    } else if (typeof spec.staticPodPath === 'string' && spec.staticPodPath !== '') {
      fail('spec.kubeletConfig.staticPodPath', 'static-pod-path', `KubeletConfiguration: staticPodPath must be empty for pool "${pool.metadata.name}", but contains: ${spec.staticPodPath}`);
    }
  }
  if (baseKubeletConf === undefined) {
    fail('spec', 'base-config-missing', `no MachineConfig of pool ${pool.metadata.name} provides ${KUBELET_CONF_PATH} to merge over (MCO renders it from its templates; import or apply the pool's 01-${pool.metadata.name}-kubelet config)`);
  }
  let parsed: unknown;
  try {
    // DecodeKubeletConfig reads YAML through sigs.k8s.io/yaml, which is YAML 1.1 (yaml.v2).
    parsed = parseYaml(baseKubeletConf!, { version: '1.1' });
    if (!isRecord(parsed)) throw new Error('not a mapping');
  } catch (err) {
    return fail('spec', 'base-config-syntax', `the pool's ${KUBELET_CONF_PATH} is not a KubeletConfiguration: ${(err as Error).message.split('\n')[0]}`);
  }
  // MCO decodes its base into the struct too: a key that is no field is gone from what it writes.
  const baseCheck = new ProblemCollector(object);
  const base = decodeKubeletConfiguration(parsed, baseCheck, KUBELET_CONF_PATH).value;
  if (!baseCheck.ok) fail('spec', 'base-config-syntax', `the pool's ${KUBELET_CONF_PATH} is not a KubeletConfiguration: ${baseCheck.problems[0]!.message}`);
  if (kc.spec.tlsSecurityProfile) {
    // syncKubeletConfig sets these on the template's config before generateKubeletIgnFiles merges
    // the spec over it, so kubeletConfig.tlsMinVersion/tlsCipherSuites still win over the profile.
    // Both fields are omitempty: an empty value (a Custom profile without them) leaves them out.
    const { tlsMinVersion, tlsCipherSuites } = securityProfileCiphers(kc.spec.tlsSecurityProfile);
    if (tlsMinVersion !== '') base.tlsMinVersion = tlsMinVersion;
    else delete base.tlsMinVersion;
    if (tlsCipherSuites.length > 0) base.tlsCipherSuites = tlsCipherSuites;
    else delete base.tlsCipherSuites;
  }

  const userSystemReserved: Record<string, string> = {};
  if (spec) {
    if (isRecord(spec.systemReserved)) {
      for (const key of ['memory', 'cpu', 'ephemeral-storage']) {
        if (key in spec.systemReserved) {
          userSystemReserved[key] = String(spec.systemReserved[key] ?? '');
          delete spec.systemReserved[key];
        }
      }
    }
    // Feature gates come from the cluster's FeatureGate, never from a KubeletConfig.
    delete spec.featureGates;
    // protectKernelDefaults is a plain bool: false would be dropped as a zero value, so MCO
    // looks for it in the raw spec.
    if (raw!.protectKernelDefaults === false) base.protectKernelDefaults = false;
    mergeOver(base, spec, true);
    const enforce = spec.enforceNodeAllocatable;
    if ((spec.systemReservedCgroup === undefined || spec.systemReservedCgroup === '') && Array.isArray(enforce) && enforce.length > 0 && !enforce.some((v) => SYSTEM_RESERVED_ENFORCEMENT.includes(String(v)))) {
      delete base.systemReservedCgroup;
    }
  }
  if (typeof base.reservedSystemCPUs === 'string' && base.reservedSystemCPUs !== '') {
    // Reserved CPUs replace the system-reserved cgroup: enforcing both fails kubelet validation.
    delete base.systemReservedCgroup;
    const filtered = (Array.isArray(base.enforceNodeAllocatable) ? base.enforceNodeAllocatable.map(String) : []).filter((v) => !SYSTEM_RESERVED_ENFORCEMENT.includes(v));
    base.enforceNodeAllocatable = filtered.includes(PODS_ENFORCEMENT) ? filtered : [PODS_ENFORCEMENT, ...filtered];
  }
  if (typeof base.systemReservedCgroup === 'string' && base.systemReservedCgroup !== '' && typeof base.systemCgroups === 'string' && base.systemCgroups !== '' && base.systemReservedCgroup !== base.systemCgroups) {
    fail('spec.kubeletConfig', 'system-reserved-cgroup', `invalid merged configuration: systemReservedCgroup (${base.systemReservedCgroup}) must match systemCgroups (${base.systemCgroups})`);
  }
  base.apiVersion = 'kubelet.config.k8s.io/v1beta1';
  base.kind = 'KubeletConfiguration';
  const encoded = encodeKubeletConfiguration(base);

  const files: GeneratedFile[] = [];
  const sizing = (auto: boolean | undefined, reserved: Record<string, string>): string =>
    `NODE_SIZING_ENABLED=${auto === undefined ? 'false' : String(auto)}\nSYSTEM_RESERVED_MEMORY=${reserved.memory || '1Gi'}\nSYSTEM_RESERVED_CPU=${reserved.cpu || '500m'}\nSYSTEM_RESERVED_ES=${reserved['ephemeral-storage'] || '1Gi'}\n`;
  if (Object.keys(userSystemReserved).length > 0) files.push({ path: NODE_SIZING_ENV_PATH, contents: sizing(undefined, userSystemReserved) });
  else if (kc.spec.autoSizingReserved !== undefined) files.push({ path: NODE_SIZING_ENV_PATH, contents: sizing(kc.spec.autoSizingReserved, {}) });
  if (kc.spec.logLevel !== undefined) files.push({ path: KUBELET_LOGGING_DROPIN_PATH, contents: `[Service]\nEnvironment="KUBELET_LOG_LEVEL=${kc.spec.logLevel}"\n` });
  // The kubelet config encoder goes through JSON to YAML (sigs.k8s.io/yaml, yaml.v2's writer).
  files.push({ path: KUBELET_CONF_PATH, contents: stringifyGoYaml(encoded) });
  return files;
}

/** The decoded spec, or the problems (a config stored before the types were checked) thrown. */
function decodeOrThrow(raw: Record<string, unknown>, object: string, field: string): Record<string, unknown> {
  const c = new ProblemCollector(object);
  const { value } = decodeKubeletConfiguration(raw, c, field);
  if (!c.ok) throw new GenerateConfigError(c.problems);
  return value;
}

/** Labels and annotations of a higher-level config that decide its generated MachineConfig's name. */
export interface NamedSource {
  name: string;
  annotations?: Record<string, string>;
  selector: LabelSelector | null;
}

/**
 * getManagedKubeletConfigKey / getManagedKeyCtrCfg: `99-<pool>-generated-<kind>` for the first
 * config of a pool, `-N` for later ones: the mc-name-suffix annotation if set, else the name the
 * config already owns (MCO keeps it in its finalizers), else the highest suffix in use + 1.
 * `owned` maps each source name to the generated name it already holds for this pool.
 */
export function managedKey(pool: MachineConfigPool, kind: 'kubelet' | 'containerruntime', cfg: NamedSource, all: readonly NamedSource[], owned: ReadonlyMap<string, string>): string {
  const base = `99-${pool.metadata.name}-generated-${kind}`;
  const inPool = all.filter((s) => poolsSelectedBy(s.selector, [pool]).length > 0);
  const suffix = cfg.annotations?.[MC_NAME_SUFFIX_ANNOTATION];
  if (suffix !== undefined) return suffix === '' ? base : `${base}-${suffix}`;
  const mine = owned.get(cfg.name);
  if (mine !== undefined) return mine;
  if (inPool.length <= 1) return base;
  // MCO starts from 0, so with several configs in a pool and none placed yet the first gets -1.
  let max = 0;
  for (const s of inPool) {
    if (s.name === cfg.name) continue;
    const held = s.annotations?.[MC_NAME_SUFFIX_ANNOTATION] ?? owned.get(s.name)?.slice(base.length + 1);
    if (held === undefined) continue;
    const n = held === '' ? 0 : Number(held);
    if (Number.isInteger(n) && n > max) max = n;
  }
  if (max + 1 > MAX_MC_NAME_SUFFIX) {
    const what = kind === 'kubelet' ? 'kubelet config' : 'container runtime config';
    throw new GenerateConfigError([{ object: `${kind === 'kubelet' ? KIND_KUBELET_CONFIG : 'ContainerRuntimeConfig'}/${cfg.name}`, field: 'metadata.name', rule: 'max-configs-per-pool', message: `max number of supported ${what} (10) has been reached for pool ${pool.metadata.name}. Please delete old ${what}s before retrying` }]);
  }
  return `${base}-${max + 1}`;
}
