// ContainerRuntimeConfig (machineconfiguration.openshift.io/v1): validated and made into the
// files of `99-<pool>-generated-containerruntime[-N]` as MCO makes them. Followed files
// (machine-config-operator 7ff337a4): pkg/controller/container-runtime-config/helpers.go
// (validateUserContainerRuntimeConfig, createCRIODropinFiles and its one-field TOML structs,
// updateStorageConfig, needsStorageUpdate, needsCRIODropinUpdate) and
// container_runtime_config_controller.go (syncContainerRuntimeConfig: storage.conf first, then
// the drop-ins). The additional layer/image/artifact stores are behind the AdditionalStorageConfig
// feature gate, which the openshift/api MCO vendors at that commit (features/features.go) turns on
// in the Default feature set (and TechPreview): mcplane writes them as MCO does with the gate on,
// the layer and image stores into storage.conf, the artifact stores into a CRI-O drop-in.

import { API_VERSION } from './constants.ts';
import { GenerateConfigError, TomlSyntaxError } from './errors.ts';
import { parseLabelSelector } from './label-selector.ts';
import { checkApiVersion, parseObjectMeta } from './object-meta.ts';
import { isRecord, type ProblemCollector } from './problem-collector.ts';
import { parseQuantity, type Quantity } from './quantity.ts';
import type { GeneratedFile } from './registries-config.ts';
import { encodeToml, parseToml, type TomlTable, type TomlValue } from './toml.ts';
import type { LabelSelector, ObjectMeta } from './types.ts';

export const KIND_CONTAINER_RUNTIME_CONFIG = 'ContainerRuntimeConfig';
export const STORAGE_CONF_PATH = '/etc/containers/storage.conf';
export const CRIO_DROPIN_LOG_LEVEL = '/etc/crio/crio.conf.d/01-ctrcfg-logLevel';
export const CRIO_DROPIN_PIDS_LIMIT = '/etc/crio/crio.conf.d/01-ctrcfg-pidsLimit';
export const CRIO_DROPIN_LOG_SIZE_MAX = '/etc/crio/crio.conf.d/01-ctrcfg-logSizeMax';
export const CRIO_DROPIN_DEFAULT_RUNTIME = '/etc/crio/crio.conf.d/01-ctrcfg-defaultRuntime';
export const CRIO_DROPIN_ADDITIONAL_ARTIFACT_STORES = '/etc/crio/crio.conf.d/01-ctrcfg-additionalArtifactStores';

const MIN_LOG_SIZE = 8192;
const MIN_PIDS_LIMIT = 20;
const LOG_LEVELS = ['error', 'fatal', 'panic', 'warn', 'info', 'debug', 'trace'];
const DEFAULT_RUNTIMES = ['', 'runc', 'crun'];
const STORE_PATH = /^\/[a-zA-Z0-9/._-]+$/;
/** The CRD's maxItems for each store list (minItems is 1, a path at most 256 characters). */
const MAX_STORES = { additionalLayerStores: 5, additionalImageStores: 10, additionalArtifactStores: 10 } as const;
const MAX_STORE_PATH = 256;
/** containers/storage resolves an additional layer store's layers by reference only with this suffix. */
const LAYER_STORE_REF_SUFFIX = ':ref';

export interface ContainerRuntimeConfiguration {
  pidsLimit?: number;
  logLevel?: string;
  logSizeMax?: Quantity;
  overlaySize?: Quantity;
  defaultRuntime?: string;
  /** As the API spells them ({path}), so a stored config reads back as applied. */
  additionalLayerStores?: { path: string }[];
  additionalImageStores?: { path: string }[];
  additionalArtifactStores?: { path: string }[];
}

export interface ContainerRuntimeConfig {
  apiVersion: string;
  kind: typeof KIND_CONTAINER_RUNTIME_CONFIG;
  metadata: ObjectMeta;
  spec: { machineConfigPoolSelector: LabelSelector | null; containerRuntimeConfig?: ContainerRuntimeConfiguration };
}

/** Validates a ContainerRuntimeConfig document with MCO's rules; every problem goes into `c`. */
export function parseContainerRuntimeConfig(doc: Record<string, unknown>, c: ProblemCollector): ContainerRuntimeConfig | undefined {
  checkApiVersion(doc, c);
  const metadata = parseObjectMeta(doc.metadata, c);
  const spec = c.record(doc.spec, 'spec') ?? {};
  c.onlyKeys(spec, 'spec', ['machineConfigPoolSelector', 'containerRuntimeConfig']);
  const machineConfigPoolSelector = parseLabelSelector(spec.machineConfigPoolSelector, c, 'spec.machineConfigPoolSelector');
  const raw = c.record(spec.containerRuntimeConfig, 'spec.containerRuntimeConfig');
  let ctr: ContainerRuntimeConfiguration | undefined;
  if (raw) {
    const f = 'spec.containerRuntimeConfig';
    c.onlyKeys(raw, f, ['pidsLimit', 'logLevel', 'logSizeMax', 'overlaySize', 'defaultRuntime', 'additionalLayerStores', 'additionalImageStores', 'additionalArtifactStores']);
    ctr = {};
    const pids = c.integer(raw.pidsLimit, f, 'pidsLimit');
    if (pids !== undefined) {
      if (pids !== 0 && pids < MIN_PIDS_LIMIT) c.add(`${f}.pidsLimit`, 'pids-limit', `invalid PidsLimit ${pids}: 0 or at least ${MIN_PIDS_LIMIT}`);
      ctr.pidsLimit = pids;
    }
    const quantity = (key: 'logSizeMax' | 'overlaySize'): Quantity | undefined => {
      const v = raw[key];
      if (v === undefined || v === null) return undefined;
      const q = typeof v === 'string' || typeof v === 'number' ? parseQuantity(v) : undefined;
      if (q && !('error' in q)) return q;
      c.add(`${f}.${key}`, 'quantity', `${JSON.stringify(v)} is not a quantity such as 10G or 512Mi${q ? ` (${q.error})` : ''}`);
      return undefined;
    };
    const logSizeMax = quantity('logSizeMax');
    if (logSizeMax) {
      if (logSizeMax.value > 0 && logSizeMax.value <= MIN_LOG_SIZE) c.add(`${f}.logSizeMax`, 'log-size-max', `invalid LogSizeMax "${logSizeMax.text}", cannot be less than 8kB`);
      ctr.logSizeMax = logSizeMax;
    }
    const overlaySize = quantity('overlaySize');
    if (overlaySize) {
      if (overlaySize.value < 0) c.add(`${f}.overlaySize`, 'overlay-size', `invalid overlaySize "${overlaySize.text}", cannot be less than 0`);
      ctr.overlaySize = overlaySize;
    }
    const logLevel = c.string(raw.logLevel, f, 'logLevel');
    if (logLevel !== undefined && logLevel !== '') {
      if (!LOG_LEVELS.includes(logLevel)) c.add(`${f}.logLevel`, 'crio-log-level', `invalid LogLevel "${logLevel}", must be one of error, fatal, panic, warn, info, debug, or trace`);
      ctr.logLevel = logLevel;
    }
    const defaultRuntime = c.string(raw.defaultRuntime, f, 'defaultRuntime');
    if (defaultRuntime !== undefined && defaultRuntime !== '') {
      if (!DEFAULT_RUNTIMES.includes(defaultRuntime)) c.add(`${f}.defaultRuntime`, 'default-runtime', `invalid DefaultRuntime "${defaultRuntime}", must be one of crun, runc`);
      ctr.defaultRuntime = defaultRuntime;
    }
    for (const key of ['additionalLayerStores', 'additionalImageStores', 'additionalArtifactStores'] as const) {
      const FIELD_NAME = key[0]!.toUpperCase() + key.slice(1);
      const list = c.array(raw[key], f, key);
      if (!list) continue;
      // The CRD's bounds and its CEL rule self.all(x, self.exists_one(y, x.path == y.path)).
      if (list.length < 1 || list.length > MAX_STORES[key]) c.add(`${f}.${key}`, 'store-count', `${key} must list 1 to ${MAX_STORES[key]} stores, got ${list.length}`);
      const stores: { path: string }[] = [];
      const seen = new Set<string>();
      list.forEach((store, i) => {
        const path = isRecord(store) ? store.path : undefined;
        const where = `${f}.${key}[${i}].path`;
        if (typeof path !== 'string' || path === '') c.add(where, 'store-path', `invalid ${FIELD_NAME}: path must not be empty`);
        else if (path.length > MAX_STORE_PATH) c.add(where, 'store-path', `invalid ${FIELD_NAME} path: at most ${MAX_STORE_PATH} characters, got ${path.length}`);
        else if (!STORE_PATH.test(path)) c.add(where, 'store-path', `invalid ${FIELD_NAME} path "${path}": must be an absolute path containing only alphanumeric characters, '/', '.', '_', and '-'`);
        else if (path.includes('//')) c.add(where, 'store-path', `invalid ${FIELD_NAME} path "${path}": must not contain consecutive forward slashes`);
        else if (seen.has(path)) c.add(where, 'store-duplicate', `${key} must not contain duplicate paths: "${path}" is listed twice`);
        else {
          seen.add(path);
          stores.push({ path });
        }
        if (isRecord(store)) c.onlyKeys(store, `${f}.${key}[${i}]`, ['path']);
      });
      ctr[key] = stores;
    }
  }
  if (!metadata || !c.ok) return undefined;
  return { apiVersion: API_VERSION, kind: KIND_CONTAINER_RUNTIME_CONFIG, metadata, spec: { machineConfigPoolSelector, ...(ctr ? { containerRuntimeConfig: ctr } : {}) } };
}

/** One CRI-O drop-in, `[crio.runtime]` with a single key, as BurntSushi encodes MCO's one-field structs. */
function crioDropin(key: string, value: TomlValue | undefined): string {
  return encodeToml({ crio: { runtime: { [key]: value } } });
}

// containers/storage's OptionsConfig fields in struct order (all omitempty): tables go last.
const STORAGE_OPTION_KEYS = ['additionalimagestores', 'imagestore', 'additionallayerstores', 'size', 'ignore_chown_errors', 'use_composefs', 'force_mask', 'root-auto-userns-user', 'auto-userns-min-size', 'auto-userns-max-size', 'aufs', 'btrfs', 'thinpool', 'overlay', 'vfs', 'zfs', 'skip_mount_home', 'mount_program', 'mountopt', 'pull_options', 'disable-volatile'];
const DRIVER_OPTION_KEYS: Record<string, string[]> = {
  aufs: ['mountopt'],
  btrfs: ['min_space', 'size'],
  overlay: ['ignore_chown_errors', 'mountopt', 'mount_program', 'size', 'inodes', 'skip_mount_home', 'use_composefs', 'force_mask'],
  vfs: ['ignore_chown_errors'],
  zfs: ['mountopt', 'fsname', 'size'],
  thinpool: [],
};

const isEmptyToml = (v: TomlValue | undefined): boolean =>
  v === undefined || v === '' || v === 0 || v === false || (Array.isArray(v) && v.length === 0) || (isRecord(v) && Object.values(v).every((x) => isEmptyToml(x as TomlValue | undefined)));

/** Keeps `keys` of `t` in that order, dropping empty values (omitempty), as decoding into MCO's struct and encoding again does. */
function project(t: TomlValue | undefined, keys: string[], nested: (key: string, v: TomlValue) => TomlValue | undefined = (_, v) => v): TomlTable {
  const out: TomlTable = {};
  if (!isRecord(t)) return out;
  for (const k of keys) {
    const v = (t as TomlTable)[k];
    if (v === undefined) continue;
    const projected = nested(k, v);
    if (!isEmptyToml(projected)) out[k] = projected;
  }
  return out;
}

/** What updateStorageConfig sets: options.size (a zero leaves the base's), and the additional layer and image stores (replacing the base's). */
export interface StorageChanges {
  overlaySize?: Quantity;
  additionalLayerStores?: readonly { path: string }[];
  additionalImageStores?: readonly { path: string }[];
}

/** updateStorageConfig: storage.conf through MCO's tomlConfigStorage struct, with the changes set. */
export function updateStorageConfig(base: string, changes: StorageChanges): string {
  const t = parseToml(base);
  const storage = isRecord(t.storage) ? (t.storage as TomlTable) : {};
  const str = (v: TomlValue | undefined): string => (typeof v === 'string' ? v : '');
  const options = project(storage.options, STORAGE_OPTION_KEYS, (k, v) => {
    if (k in DRIVER_OPTION_KEYS) return project(v, DRIVER_OPTION_KEYS[k]!);
    if (k === 'pull_options' && isRecord(v)) return Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    return v;
  });
  // A zero size leaves the base's (MCO sets it only when non-zero); an empty store list too.
  const { overlaySize, additionalLayerStores = [], additionalImageStores = [] } = changes;
  if (overlaySize && overlaySize.value !== 0) options.size = overlaySize.text;
  if (additionalLayerStores.length > 0) options.additionallayerstores = additionalLayerStores.map((s) => (s.path.endsWith(LAYER_STORE_REF_SUFFIX) ? s.path : s.path + LAYER_STORE_REF_SUFFIX));
  if (additionalImageStores.length > 0) options.additionalimagestores = additionalImageStores.map((s) => s.path);
  const ordered: TomlTable = {};
  for (const k of STORAGE_OPTION_KEYS) if (options[k] !== undefined) ordered[k] = options[k];
  return encodeToml({ storage: { driver: str(storage.driver), runroot: str(storage.runroot), graphroot: str(storage.graphroot), options: ordered } });
}

/**
 * The files of a ContainerRuntimeConfig for one pool, in MCO's order: storage.conf (overlaySize,
 * additional layer and image stores) first, then one CRI-O drop-in per field. `baseStorageConf` is
 * the pool's storage.conf from its other configs, needed only for storage.conf.
 */
export function generateContainerRuntimeFiles(cfg: ContainerRuntimeConfig, baseStorageConf: string | undefined): GeneratedFile[] {
  const object = `${KIND_CONTAINER_RUNTIME_CONFIG}/${cfg.metadata.name}`;
  const ctr = cfg.spec.containerRuntimeConfig ?? {};
  const files: GeneratedFile[] = [];
  // needsStorageUpdate (with AdditionalStorageConfig on): which field asks for storage.conf.
  // IsZero(); a quantity stored before `zero` was kept has only its value to go by.
  const storageField = ctr.overlaySize && !(ctr.overlaySize.zero ?? ctr.overlaySize.value === 0) ? 'overlaySize' : ctr.additionalLayerStores?.length ? 'additionalLayerStores' : ctr.additionalImageStores?.length ? 'additionalImageStores' : undefined;
  if (storageField) {
    const field = `spec.containerRuntimeConfig.${storageField}`;
    if (baseStorageConf === undefined) {
      throw new GenerateConfigError([{ object, field, rule: 'base-config-missing', message: `no MachineConfig of the pool provides ${STORAGE_CONF_PATH} to set ${storageField} in (MCO renders it from its templates)` }]);
    }
    try {
      files.push({ path: STORAGE_CONF_PATH, contents: updateStorageConfig(baseStorageConf, ctr) });
    } catch (err) {
      // MCO records this failure and still writes the drop-ins; mcplane fails the whole config,
      // so the status names the one problem instead of a half-applied config.
      if (!(err instanceof TomlSyntaxError)) throw err;
      throw new GenerateConfigError([{ object, field, rule: 'base-config-syntax', message: `error decoding crio config ${STORAGE_CONF_PATH}: ${err.message}` }]);
    }
  }
  if (ctr.logLevel) files.push({ path: CRIO_DROPIN_LOG_LEVEL, contents: crioDropin('log_level', ctr.logLevel) });
  // pids_limit and log_size_max are omitempty int64s: a 0 leaves an empty [crio.runtime].
  if (ctr.pidsLimit !== undefined) files.push({ path: CRIO_DROPIN_PIDS_LIMIT, contents: crioDropin('pids_limit', ctr.pidsLimit || undefined) });
  if (ctr.logSizeMax && ctr.logSizeMax.value !== 0) files.push({ path: CRIO_DROPIN_LOG_SIZE_MAX, contents: crioDropin('log_size_max', ctr.logSizeMax.value) });
  if (ctr.defaultRuntime) files.push({ path: CRIO_DROPIN_DEFAULT_RUNTIME, contents: crioDropin('default_runtime', ctr.defaultRuntime) });
  if (ctr.additionalArtifactStores?.length) files.push({ path: CRIO_DROPIN_ADDITIONAL_ARTIFACT_STORES, contents: crioDropin('additional_artifact_stores', ctr.additionalArtifactStores.map((s) => s.path)) });
  return files;
}
