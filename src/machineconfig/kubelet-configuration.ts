// k8s.io/kubelet/config/v1beta1 KubeletConfiguration as Go's encoding/json reads and writes it.
// MCO never merges a KubeletConfig's YAML as text: DecodeKubeletConfig (helpers.go) reads
// spec.kubeletConfig, and the pool's base kubelet.conf, into the typed struct, and
// EncodeKubeletConfig writes the merged struct back. So, exactly as MCO:
// - a value of the wrong type is refused ("KubeletConfig could not be unmarshalled": maxPods
//   given as "250", a number in evictionHard), where written through it would stop the kubelet on
//   every node of the pool;
// - a key matches its field without regard to case (MaxPods is maxPods), and a key that is no
//   field is dropped (mcplane says so in an Apply warning; MCO drops it without a word);
// - durations are written as Go writes them ("5m" becomes "5m0s"), and every field without
//   omitempty, and every struct, is written even when zero ("syncFrequency: 0s", "memorySwap: {}").
// The field table follows the struct as vendored at machine-config-operator 7ff337a4
// (vendor/k8s.io/kubelet/config/v1beta1/types.go, component-base logs and tracing, core/v1 Taint).

import { formatGoDuration, parseGoDuration } from './go-duration.ts';
import { isRecord, type ProblemCollector } from './problem-collector.ts';
import { parseQuantity } from './quantity.ts';

/** A Go type as encoding/json treats it. */
type GoType =
  | { kind: 'string' | 'bool' | 'float64' | 'duration' | 'time' | 'quantity' | 'timeOrDuration' }
  | { kind: 'int'; bits: 32 | 64; unsigned?: boolean }
  | { kind: 'map'; of: GoType }
  | { kind: 'slice'; of: GoType }
  | { kind: 'struct'; name: string; fields: readonly Field[] };

interface Field {
  /** The json tag's name. */
  json: string;
  type: GoType;
  /** A pointer: nil (left out) when unset; set, it is written whatever it holds. */
  pointer?: boolean;
  /** `omitempty`: a zero value of a non-struct type is left out when written. */
  omitempty?: boolean;
}

const str = { kind: 'string' } as const;
const bool = { kind: 'bool' } as const;
const int32 = { kind: 'int', bits: 32 } as const;
const int64 = { kind: 'int', bits: 64 } as const;
const uint32 = { kind: 'int', bits: 32, unsigned: true } as const;
const duration = { kind: 'duration' } as const;
const mapOf = (of: GoType): GoType => ({ kind: 'map', of });
const sliceOf = (of: GoType): GoType => ({ kind: 'slice', of });
const struct = (name: string, fields: readonly Field[]): GoType => ({ kind: 'struct', name, fields });
/** A field tagged `json:"NAME,omitempty"`. */
const opt = (json: string, type: GoType): Field => ({ json, type, omitempty: true });
/** A pointer field, `json:"NAME,omitempty"`. */
const ptr = (json: string, type: GoType): Field => ({ json, type, pointer: true, omitempty: true });
/** A field tagged `json:"NAME"`: always written. */
const req = (json: string, type: GoType): Field => ({ json, type });

const outputRouting = struct('OutputRoutingOptions', [opt('splitStream', bool), opt('infoBufferSize', { kind: 'quantity' })]);

const KUBELET_CONFIGURATION = struct('KubeletConfiguration', [
  opt('kind', str), opt('apiVersion', str),
  ptr('enableServer', bool), opt('staticPodPath', str), opt('podLogsDir', str),
  opt('syncFrequency', duration), opt('fileCheckFrequency', duration), opt('httpCheckFrequency', duration),
  opt('staticPodURL', str), opt('staticPodURLHeader', mapOf(sliceOf(str))),
  opt('address', str), opt('port', int32), opt('readOnlyPort', int32),
  opt('tlsCertFile', str), opt('tlsPrivateKeyFile', str), opt('tlsCipherSuites', sliceOf(str)), opt('tlsCurvePreferences', sliceOf(int32)), opt('tlsMinVersion', str),
  opt('rotateCertificates', bool), opt('serverTLSBootstrap', bool),
  req('authentication', struct('KubeletAuthentication', [
    req('x509', struct('KubeletX509Authentication', [opt('clientCAFile', str)])),
    req('webhook', struct('KubeletWebhookAuthentication', [ptr('enabled', bool), opt('cacheTTL', duration)])),
    req('anonymous', struct('KubeletAnonymousAuthentication', [ptr('enabled', bool)])),
  ])),
  req('authorization', struct('KubeletAuthorization', [
    opt('mode', str),
    req('webhook', struct('KubeletWebhookAuthorization', [opt('cacheAuthorizedTTL', duration), opt('cacheUnauthorizedTTL', duration)])),
  ])),
  ptr('registryPullQPS', int32), opt('registryBurst', int32),
  opt('imagePullCredentialsVerificationPolicy', str), opt('preloadedImagesVerificationAllowlist', sliceOf(str)),
  ptr('eventRecordQPS', int32), opt('eventBurst', int32),
  ptr('enableDebuggingHandlers', bool), opt('enableContentionProfiling', bool),
  ptr('healthzPort', int32), opt('healthzBindAddress', str), ptr('oomScoreAdj', int32),
  opt('clusterDomain', str), opt('clusterDNS', sliceOf(str)),
  opt('streamingConnectionIdleTimeout', duration), opt('nodeStatusUpdateFrequency', duration), opt('nodeStatusReportFrequency', duration),
  opt('nodeLeaseDurationSeconds', int32),
  opt('imageMinimumGCAge', duration), opt('imageMaximumGCAge', duration),
  ptr('imageGCHighThresholdPercent', int32), ptr('imageGCLowThresholdPercent', int32),
  opt('volumeStatsAggPeriod', duration),
  opt('kubeletCgroups', str), opt('systemCgroups', str), opt('cgroupRoot', str), ptr('cgroupsPerQOS', bool), opt('cgroupDriver', str),
  opt('cpuManagerPolicy', str), ptr('singleProcessOOMKill', bool), opt('cpuManagerPolicyOptions', mapOf(str)), opt('cpuManagerReconcilePeriod', duration),
  opt('memoryManagerPolicy', str), opt('topologyManagerPolicy', str), opt('topologyManagerScope', str), opt('topologyManagerPolicyOptions', mapOf(str)),
  opt('qosReserved', mapOf(str)), opt('runtimeRequestTimeout', duration), opt('hairpinMode', str),
  opt('maxPods', int32), opt('podCIDR', str), ptr('podPidsLimit', int64), ptr('resolvConf', str), opt('runOnce', bool),
  ptr('cpuCFSQuota', bool), ptr('cpuCFSQuotaPeriod', duration), ptr('nodeStatusMaxImages', int32),
  opt('maxOpenFiles', int64), opt('contentType', str), ptr('kubeAPIQPS', int32), opt('kubeAPIBurst', int32),
  ptr('serializeImagePulls', bool), ptr('maxParallelImagePulls', int32),
  opt('evictionHard', mapOf(str)), opt('evictionSoft', mapOf(str)), opt('evictionSoftGracePeriod', mapOf(str)),
  opt('evictionPressureTransitionPeriod', duration), opt('evictionMaxPodGracePeriod', int32), opt('evictionMinimumReclaim', mapOf(str)),
  ptr('mergeDefaultEvictionSettings', bool), opt('podsPerCore', int32), ptr('enableControllerAttachDetach', bool), opt('protectKernelDefaults', bool),
  ptr('makeIPTablesUtilChains', bool), ptr('iptablesMasqueradeBit', int32), ptr('iptablesDropBit', int32),
  opt('featureGates', mapOf(bool)), ptr('failSwapOn', bool),
  opt('memorySwap', struct('MemorySwapConfiguration', [opt('swapBehavior', str)])),
  opt('containerLogMaxSize', str), ptr('containerLogMaxFiles', int32), ptr('containerLogMaxWorkers', int32), ptr('containerLogMonitorInterval', duration),
  opt('configMapAndSecretChangeDetectionStrategy', str),
  opt('systemReserved', mapOf(str)), opt('kubeReserved', mapOf(str)), opt('reservedSystemCPUs', str), opt('showHiddenMetricsForVersion', str),
  opt('systemReservedCgroup', str), opt('kubeReservedCgroup', str), opt('enforceNodeAllocatable', sliceOf(str)), opt('allowedUnsafeSysctls', sliceOf(str)),
  opt('volumePluginDir', str), opt('providerID', str), opt('kernelMemcgNotification', bool),
  opt('logging', struct('LoggingConfiguration', [
    opt('format', str), req('flushFrequency', { kind: 'timeOrDuration' }), req('verbosity', uint32),
    opt('vmodule', sliceOf(struct('VModuleItem', [req('filePattern', str), req('verbosity', uint32)]))),
    opt('options', struct('FormatOptions', [opt('text', outputRouting), opt('json', outputRouting)])),
  ])),
  ptr('enableSystemLogHandler', bool), ptr('enableSystemLogQuery', bool),
  opt('shutdownGracePeriod', duration), opt('shutdownGracePeriodCriticalPods', duration),
  opt('shutdownGracePeriodByPodPriority', sliceOf(struct('ShutdownGracePeriodByPodPriority', [req('priority', int32), req('shutdownGracePeriodSeconds', int64)]))),
  opt('crashLoopBackOff', struct('CrashLoopBackOffConfig', [ptr('maxContainerRestartPeriod', duration)])),
  opt('reservedMemory', sliceOf(struct('MemoryReservation', [req('numaNode', int32), req('limits', mapOf({ kind: 'quantity' }))]))),
  ptr('enableProfilingHandler', bool), ptr('enableDebugFlagsHandler', bool), ptr('seccompDefault', bool),
  ptr('memoryThrottlingFactor', { kind: 'float64' }), opt('memoryReservationPolicy', str),
  opt('registerWithTaints', sliceOf(struct('Taint', [req('key', str), opt('value', str), req('effect', str), ptr('timeAdded', { kind: 'time' })]))),
  ptr('registerNode', bool),
  ptr('tracing', struct('TracingConfiguration', [ptr('endpoint', str), ptr('samplingRatePerMillion', int32)])),
  ptr('localStorageCapacityIsolation', bool),
  req('containerRuntimeEndpoint', str), opt('imageServiceEndpoint', str),
  ptr('failCgroupV1', bool), ptr('userNamespaces', struct('UserNamespaces', [ptr('idsPerPod', int64)])),
]);

/** What decoding found besides the value: the keys dropped, each as a dotted path. */
export interface Decoded {
  value: Record<string, unknown>;
  ignored: string[];
}

/** How a value of `type` is named in a refusal, as Go names it ("int32", "map[string]string"). */
function goTypeName(type: GoType): string {
  switch (type.kind) {
    case 'int': return `${type.unsigned ? 'uint' : 'int'}${type.bits}`;
    case 'map': return `map[string]${goTypeName(type.of)}`;
    case 'slice': return `[]${goTypeName(type.of)}`;
    case 'struct': return `a mapping (${type.name})`;
    case 'duration': return 'a duration string such as "5m0s"';
    case 'time': return 'an RFC 3339 time string';
    case 'quantity': return 'a quantity such as "1Gi"';
    case 'timeOrDuration': return 'a duration string or a number of nanoseconds';
    default: return type.kind;
  }
}

/** What a JSON value is, in Go's error wording ("string", "number", "object"). */
function jsonKind(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (isRecord(v)) return 'object';
  return typeof v === 'number' ? 'number' : typeof v === 'boolean' ? 'bool' : typeof v === 'string' ? 'string' : 'value';
}

/**
 * Reads `raw` as Go's encoding/json reads it into a KubeletConfiguration: every type mismatch
 * goes into `c` at `field` (say spec.kubeletConfig), naming the key path and the type it needs.
 * The value returned has each key as its field's json name, durations and quantities in the form
 * Go writes them, no key that is not a field, and nulls left out (Go leaves the field unset).
 */
export function decodeKubeletConfiguration(raw: Record<string, unknown>, c: ProblemCollector, field: string): Decoded {
  const ignored: string[] = [];
  const value = decodeStruct(KUBELET_CONFIGURATION as StructType, raw, '', { c, field, ignored });
  return { value, ignored };
}

interface DecodeContext {
  c: ProblemCollector;
  field: string;
  ignored: string[];
}

type StructType = Extract<GoType, { kind: 'struct' }>;

/** Each struct's fields by exact json name and by lower-cased name (the first such field). */
const FIELD_INDEX = new WeakMap<StructType, { exact: Map<string, Field>; folded: Map<string, Field> }>();

/** encoding/json's field for a key: the one of that exact name, else the first that folds to it. */
function fieldFor(type: StructType, key: string): Field | undefined {
  let index = FIELD_INDEX.get(type);
  if (!index) {
    index = { exact: new Map(type.fields.map((f) => [f.json, f])), folded: new Map() };
    for (const f of type.fields) if (!index.folded.has(f.json.toLowerCase())) index.folded.set(f.json.toLowerCase(), f);
    FIELD_INDEX.set(type, index);
  }
  return index.exact.get(key) ?? index.folded.get(key.toLowerCase());
}

function decodeStruct(type: StructType, raw: Record<string, unknown>, path: string, ctx: DecodeContext): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(raw)) {
    const f = fieldFor(type, key);
    const at = path ? `${path}.${key}` : key;
    if (!f) {
      ctx.ignored.push(at);
      continue;
    }
    const fieldPath = path ? `${path}.${f.json}` : f.json;
    if (v === null || v === undefined) {
      // null leaves a field as it is, except a metav1.Duration, whose UnmarshalJSON reads it as
      // the duration "" (a pointer to one is just left nil).
      if (f.type.kind === 'duration' && !f.pointer) decodeValue(f.type, '', fieldPath, ctx);
      continue;
    }
    const decoded = decodeValue(f.type, v, fieldPath, ctx);
    if (decoded === undefined) continue;
    // Two keys for one field: Go decodes both in order, into the same map or struct.
    out[f.json] = mergeDecoded(f.type, out[f.json], decoded);
  }
  return out;
}

function mergeDecoded(type: GoType, prior: unknown, next: unknown): unknown {
  if (!isRecord(prior) || !isRecord(next)) return next;
  if (type.kind === 'map') return { ...prior, ...next };
  if (type.kind !== 'struct') return next;
  const out = { ...prior };
  for (const [k, v] of Object.entries(next)) out[k] = mergeDecoded(fieldFor(type, k)!.type, out[k], v);
  return out;
}

/** One value of `type`, or undefined (with a problem added) when it does not decode. */
function decodeValue(type: GoType, v: unknown, path: string, ctx: DecodeContext): unknown {
  const refuse = (why?: string): undefined => {
    ctx.c.add(`${ctx.field}.${path}`, 'kubelet-config-type', `KubeletConfig could not be unmarshalled: ${path} must be ${goTypeName(type)}, got ${why ?? `${jsonKind(v)} ${JSON.stringify(v)}`} (MCO refuses it too, and keeps the pool's kubelet.conf as it was)`);
    return undefined;
  };
  switch (type.kind) {
    case 'string':
      return typeof v === 'string' ? v : refuse();
    case 'bool':
      return typeof v === 'boolean' ? v : refuse();
    case 'float64':
      return typeof v === 'number' && Number.isFinite(v) ? v : refuse();
    case 'int': {
      if (typeof v !== 'number' || !Number.isInteger(v)) return refuse();
      const [min, max] = type.unsigned ? [0, 2 ** type.bits - 1] : type.bits === 32 ? [-(2 ** 31), 2 ** 31 - 1] : [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];
      return v >= min && v <= max ? v : refuse(`${v}, which does not fit`);
    }
    case 'duration': {
      if (typeof v !== 'string') return refuse();
      const d = parseGoDuration(v);
      return 'ns' in d ? formatGoDuration(d.ns) : refuse(`${JSON.stringify(v)} (${d.error})`);
    }
    case 'timeOrDuration': {
      // logsapi.TimeOrMetaDuration: a string is a metav1.Duration (and is written back as one), a
      // number is nanoseconds (written back as a number).
      if (typeof v === 'number') return Number.isInteger(v) ? v : refuse();
      if (typeof v !== 'string') return refuse();
      const d = parseGoDuration(v);
      return 'ns' in d ? formatGoDuration(d.ns) : refuse(`${JSON.stringify(v)} (${d.error})`);
    }
    case 'time': {
      if (typeof v !== 'string' || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(v) || Number.isNaN(Date.parse(v))) return refuse();
      // metav1.Time is written in UTC, to the second.
      return new Date(Date.parse(v)).toISOString().replace(/\.\d{3}Z$/, 'Z');
    }
    case 'quantity': {
      if (typeof v !== 'string' && typeof v !== 'number') return refuse();
      const q = parseQuantity(v);
      return 'error' in q ? refuse(`${JSON.stringify(v)} (${q.error})`) : q.text;
    }
    case 'map': {
      if (!isRecord(v)) return refuse();
      const out: Record<string, unknown> = {};
      let ok = true;
      for (const [k, x] of Object.entries(v)) {
        // A null element is the element type's zero value, its key kept.
        const d = x === null ? zeroOf(type.of) : decodeValue(type.of, x, `${path}.${k}`, ctx);
        if (d === undefined) ok = false;
        else out[k] = d;
      }
      return ok ? out : undefined;
    }
    case 'slice': {
      if (!Array.isArray(v)) return refuse();
      const out = v.map((x, i) => (x === null ? zeroOf(type.of) : decodeValue(type.of, x, `${path}[${i}]`, ctx)));
      return out.includes(undefined) ? undefined : out;
    }
    case 'struct':
      return isRecord(v) ? decodeStruct(type, v, path, ctx) : refuse();
  }
}

/**
 * The top-level fields by how mergo.Merge(dst, src, WithOverride) treats them: maps merge key by
 * key, a pointer the base lacks takes the spec's value even when zero, a zero duration ("0s")
 * never overrides. From the same table the decoder uses, so the two cannot disagree.
 */
export const KUBELET_FIELD_TRAITS = {
  maps: new Set((KUBELET_CONFIGURATION as StructType).fields.filter((f) => f.type.kind === 'map').map((f) => f.json)),
  pointers: new Set((KUBELET_CONFIGURATION as StructType).fields.filter((f) => f.pointer).map((f) => f.json)),
  /** At any depth (authentication.webhook.cacheTTL too): the merge walks nested structs by key. */
  durations: new Set(fieldsDeep(KUBELET_CONFIGURATION as StructType).filter((f) => f.type.kind === 'duration').map((f) => f.json)),
};

function fieldsDeep(type: StructType): Field[] {
  return type.fields.flatMap((f) => {
    const inner = f.type.kind === 'slice' || f.type.kind === 'map' ? f.type.of : f.type;
    return [f, ...(inner.kind === 'struct' ? fieldsDeep(inner) : [])];
  });
}

/** Go's zero value of `type`, as encoding/json writes it. */
function zeroOf(type: GoType): unknown {
  switch (type.kind) {
    case 'string': return '';
    case 'bool': return false;
    case 'int': case 'float64': case 'timeOrDuration': return 0;
    case 'duration': return '0s';
    case 'quantity': return '0';
    case 'time': return null;
    case 'map': case 'slice': return null;
    case 'struct': return encodeStruct(type, {});
  }
}

/** Whether omitempty leaves `v` out: false, 0, "", an empty map or slice (never a struct). */
function isEmpty(type: GoType, v: unknown): boolean {
  if (type.kind === 'struct' || type.kind === 'duration' || type.kind === 'quantity' || type.kind === 'timeOrDuration') return false;
  if (Array.isArray(v)) return v.length === 0;
  if (isRecord(v)) return Object.keys(v).length === 0;
  return v === false || v === 0 || v === '' || v === null || v === undefined;
}

/**
 * What EncodeKubeletConfig writes for `value` (a decoded, merged configuration): every field
 * Go would write (the zero value of each field without omitempty, and of each struct), none it
 * would leave out (the zero of an omitempty field, an unset pointer).
 */
export function encodeKubeletConfiguration(value: Record<string, unknown>): Record<string, unknown> {
  return encodeStruct(KUBELET_CONFIGURATION as StructType, value);
}

function encodeStruct(type: StructType, value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of type.fields) {
    const v = value[f.json];
    if (v === undefined || v === null) {
      if (!f.pointer && !(f.omitempty && isEmpty(f.type, zeroOf(f.type)))) out[f.json] = zeroOf(f.type);
      continue;
    }
    if (!f.pointer && f.omitempty && isEmpty(f.type, v)) continue;
    out[f.json] = encodeValue(f.type, v);
  }
  return out;
}

function encodeValue(type: GoType, v: unknown): unknown {
  if (type.kind === 'struct' && isRecord(v)) return encodeStruct(type, v);
  if (type.kind === 'slice' && Array.isArray(v)) return v.map((x) => encodeValue(type.of, x));
  if (type.kind === 'map' && isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, encodeValue(type.of, x)]));
  return v;
}
