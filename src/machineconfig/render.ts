// Merging a pool's MachineConfigs into one rendered config, with MCO's semantics
// (pkg/controller/common/helpers.go MergeMachineConfigs).

import { API_VERSION, INTERNAL_IGNITION_VERSION, KIND_MACHINE_CONFIG, MAX_RENDERED_CONFIG_BYTES, type KernelType } from './constants.ts';
import { hashedJson } from './hashed-json.ts';
import { RenderError } from './errors.ts';
import { configsForPool } from './pool-membership.ts';
import type {
  IgnitionDropin,
  IgnitionDirectory,
  IgnitionFile,
  IgnitionLink,
  IgnitionFileOwner,
  IgnitionUnit,
  IgnitionUser,
  MachineConfig,
  MachineConfigPool,
  MachineConfigSpec,
  RenderedConfig,
} from './types.ts';

const RENDERED_HASH_LENGTH = 32;

/** Renders a pool from every known config; the pool's selector picks which ones apply. */
export function renderPool(pool: MachineConfigPool, allConfigs: readonly MachineConfig[]): RenderedConfig {
  const configs = configsForPool(pool, allConfigs);
  const spec = mergeSpecs(configs.map((mc) => mc.spec));
  // mergeSpecs builds every object with its keys in sorted order, so the native serializer gives
  // the canonical form; canonicalJson would walk 10,000 files again for the same bytes. It is
  // made, measured and hashed in pieces (hashed-json.ts says why).
  const { text: canonical, bytes, sha256 } = hashedJson(spec);
  if (bytes > MAX_RENDERED_CONFIG_BYTES) {
    throw new RenderError(pool.metadata.name, [{
      object: `MachineConfigPool/${pool.metadata.name}`,
      field: 'spec.config',
      rule: 'rendered-size',
      message: `the rendered config is ${(bytes / 1048576).toFixed(2)} MiB, above the 1.5 MiB limit; ` +
        `largest contributors: ${largestConfigs(configs).join(', ')}`,
    }]);
  }
  const hash = sha256.slice(0, RENDERED_HASH_LENGTH);
  return {
    name: renderedConfigName(pool.metadata.name, hash),
    pool: pool.metadata.name,
    hash,
    spec,
    specJson: canonical,
    sources: configs.map((mc) => mc.metadata.name),
  };
}

export function renderedConfigName(pool: string, hash: string): string {
  return `rendered-${pool}-${hash}`;
}

/** Merges specs in the order given: later wins for keyed entries, lists are unioned or joined. */
export function mergeSpecs(specs: readonly MachineConfigSpec[]): MachineConfigSpec {
  const files: IgnitionFile[] = [];
  const directories: IgnitionDirectory[] = [];
  const links: IgnitionLink[] = [];
  const units = new Map<string, IgnitionUnit>();
  const sshKeys = new Set<string>();
  let passwordHash: string | undefined;
  let hasCore = false;
  const kernelArguments: string[] = [];
  const extensions = new Set<string>();
  let kernelType: KernelType = 'default';
  let fips = false;
  let osImageURL = '';
  let baseOSExtensionsContainerImage = '';

  for (const spec of specs) {
    for (const f of spec.config.storage.files) files.push(f);
    for (const d of spec.config.storage.directories ?? []) directories.push(d);
    for (const l of spec.config.storage.links ?? []) links.push(l);
    for (const u of spec.config.systemd.units) units.set(u.name, mergeUnit(units.get(u.name), u));
    for (const user of spec.config.passwd.users) {
      hasCore = true;
      for (const key of user.sshAuthorizedKeys ?? []) sshKeys.add(key);
      if (user.passwordHash !== undefined) passwordHash = user.passwordHash;
    }
    kernelArguments.push(...spec.kernelArguments);
    for (const ext of spec.extensions) extensions.add(ext);
    if (spec.kernelType !== 'default') kernelType = spec.kernelType;
    fips ||= spec.fips;
    if (spec.osImageURL) osImageURL = spec.osImageURL;
    if (spec.baseOSExtensionsContainerImage) baseOSExtensionsContainerImage = spec.baseOSExtensionsContainerImage;
  }

  // Keys in sorted order at every level: see renderPool.
  const core: IgnitionUser = { name: 'core' };
  if (passwordHash !== undefined) core.passwordHash = passwordHash;
  if (sshKeys.size > 0) core.sshAuthorizedKeys = [...sshKeys];
  const config: MachineConfigSpec['config'] = {
    ignition: { version: INTERNAL_IGNITION_VERSION },
    passwd: { users: hasCore ? [core] : [] },
    storage: {
      // MCO's day-1 directories and links, only when a config has them: the renders (and names)
      // of configs without them stay as they were.
      ...(directories.length ? { directories: lastOfEachPath(directories, sortedKeys) } : {}),
      files: lastOfEachPath(files, sortedFile),
      ...(links.length ? { links: lastOfEachPath(links, sortedKeys) } : {}),
    },
    systemd: { units: [...units.values()].sort((a, b) => compare(a.name, b.name)).map(sortedUnit) },
  };
  return {
    baseOSExtensionsContainerImage,
    config,
    extensions: [...extensions].sort(),
    fips,
    kernelArguments,
    kernelType,
    osImageURL,
  };
}

/** A small object with its keys (and its owners' keys) in sorted order. */
function sortedKeys<T extends object>(o: T): T {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(o).sort()) {
    const v = (o as Record<string, unknown>)[key];
    out[key] = v && typeof v === 'object' && !Array.isArray(v) ? sortedKeys(v) : v;
  }
  return out as T;
}

function sortedFile(f: IgnitionFile): IgnitionFile {
  // The contents object is taken as it is when it holds the source alone (what the parse makes):
  // already in canonical form, and one object fewer per file. Nothing changes a config's objects
  // after the parse, and a stored config with more in it is still copied down to the source.
  const contents = onlySource(f.contents) ? f.contents : { source: f.contents.source };
  // Most files have no owner: one literal with every member, rather than members added one by
  // one to an object made with one (which then needs a second store for the rest).
  if (!f.group && !f.user) return { contents, mode: f.mode, overwrite: true, path: f.path };
  const out = { contents } as IgnitionFile;
  if (f.group) out.group = sortedOwner(f.group);
  out.mode = f.mode;
  out.overwrite = true;
  out.path = f.path;
  if (f.user) out.user = sortedOwner(f.user);
  return out;
}

function onlySource(contents: IgnitionFile['contents']): boolean {
  let keys = 0;
  for (const key in contents) if (key !== 'source' || ++keys > 1) return false;
  return keys === 1;
}

function sortedOwner(o: IgnitionFileOwner): IgnitionFileOwner {
  const out: IgnitionFileOwner = {};
  if (o.id !== undefined) out.id = o.id;
  if (o.name !== undefined) out.name = o.name;
  return out;
}

function sortedUnit(u: IgnitionUnit): IgnitionUnit {
  const out = {} as IgnitionUnit;
  if (u.contents !== undefined) out.contents = u.contents;
  if (u.dropins) out.dropins = u.dropins.map((d) => (d.contents === undefined ? { name: d.name } : { contents: d.contents, name: d.name }));
  if (u.enabled !== undefined) out.enabled = u.enabled;
  if (u.mask !== undefined) out.mask = u.mask;
  out.name = u.name;
  return out;
}

/** Ignition's merge for units: fields set later override, dropins are keyed by name. */
function mergeUnit(earlier: IgnitionUnit | undefined, later: IgnitionUnit): IgnitionUnit {
  if (!earlier) return later;
  const out: IgnitionUnit = { ...earlier };
  if (later.enabled !== undefined) out.enabled = later.enabled;
  if (later.mask !== undefined) out.mask = later.mask;
  if (later.contents !== undefined) out.contents = later.contents;
  if (later.dropins) {
    const dropins = new Map<string, IgnitionDropin>((earlier.dropins ?? []).map((d) => [d.name, d]));
    for (const d of later.dropins) dropins.set(d.name, d);
    out.dropins = [...dropins.values()].sort((a, b) => compare(a.name, b.name));
  }
  return out;
}

/**
 * Entries in path order, the last one given for each path (a later config wins), each through
 * `copy`. The same as setting each in a Map by path and sorting its values, at a fifth of the CPU
 * for a pool's 10,000 files: the sort is stable, so of entries with one path the last given stays
 * last in its run. Copied here rather than by a map() after: one array of 10,000 fewer.
 */
function lastOfEachPath<T extends { path: string }>(entries: T[], copy: (entry: T) => T): T[] {
  entries.sort((a, b) => compare(a.path, b.path));
  const out: T[] = [];
  for (let i = 0; i < entries.length; i++) {
    if (i + 1 === entries.length || entries[i + 1]!.path !== entries[i]!.path) out.push(copy(entries[i]!));
  }
  return out;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function largestConfigs(configs: readonly MachineConfig[]): string[] {
  return configs
    .map((mc) => ({ name: mc.metadata.name, size: JSON.stringify(mc.spec).length }))
    .sort((a, b) => b.size - a.size)
    .slice(0, 3)
    .map((x) => `${x.name} (${(x.size / 1024).toFixed(0)} KiB)`);
}

/** The rendered config as a MachineConfig manifest, the shape `oc get mc rendered-...` shows. */
export function renderedConfigManifest(rendered: RenderedConfig): MachineConfig & { metadata: { annotations: Record<string, string> } } {
  return {
    apiVersion: API_VERSION,
    kind: KIND_MACHINE_CONFIG,
    metadata: {
      name: rendered.name,
      annotations: {
        'mcplane.io/pool': rendered.pool,
        'mcplane.io/source-configs': rendered.sources.join(','),
      },
    },
    spec: rendered.spec,
  };
}

/** renderedConfigManifest as JSON text, reusing the canonical spec serialization. */
export function renderedConfigJson(rendered: RenderedConfig): string {
  const { spec: _spec, ...manifest } = renderedConfigManifest(rendered);
  const head = JSON.stringify(manifest);
  return `${head.slice(0, -1)},"spec":${rendered.specJson}}`;
}
