// Ignition 2.2 and 3.0-3.5 in, one internal 3.x form out (see types.ts). Only what a running
// host can take is accepted: files under writable trees, systemd units, and the core user's SSH
// keys and password. Everything Ignition can only do at first boot (disks, filesystems, users)
// is refused here, which is where MCO's render controller refuses it too.

import { createHash } from 'node:crypto';
import {
  DEFAULT_FILE_MODE,
  INTERNAL_IGNITION_VERSION,
  MAX_FILE_CONTENTS_BYTES,
  MAX_FILE_MODE,
  SUPPORTED_IGNITION_VERSIONS,
  SYSTEMD_UNIT_SUFFIXES,
} from './constants.ts';
import { gunzipBounded } from './bounded-gunzip.ts';
import { configBudget, describeBytes, type ContentsBudget } from './contents-budget.ts';
import { base64DecodedLength, CANONICAL_DATA_URL_PREFIX, decodeDataUrlBounded, encodeDataUrl, isValidBase64 } from './data-url.ts';
import { controlCharacterViolation, quote } from './control-characters.ts';
import { managedPathViolation } from './paths.ts';
import { fieldAt, isNonEmpty, join, ProblemCollector } from './problem-collector.ts';
import type {
  IgnitionConfig,
  IgnitionDirectory,
  IgnitionDropin,
  IgnitionFile,
  IgnitionFileOwner,
  IgnitionLink,
  IgnitionUnit,
  IgnitionUser,
} from './types.ts';

type Raw = Record<string, unknown>;

// Known keys per spec family, built once: these checks run for every file of every config.
const KEYS = {
  top2: ['ignition', 'passwd', 'storage', 'systemd', 'networkd'],
  top3: ['ignition', 'kernelArguments', 'passwd', 'storage', 'systemd'],
  ignition: ['version', 'config', 'proxy', 'security', 'timeouts'],
  storage2: ['files', 'directories', 'links', 'disks', 'filesystems', 'raid'],
  storage3: ['files', 'directories', 'links', 'disks', 'filesystems', 'raid', 'luks'],
  file2: ['path', 'contents', 'mode', 'user', 'group', 'overwrite', 'append', 'filesystem'],
  file3: ['path', 'contents', 'mode', 'user', 'group', 'overwrite', 'append'],
  contents: ['source', 'compression', 'verification', 'httpHeaders'],
  unit2: ['name', 'enabled', 'enable', 'mask', 'contents', 'dropins'],
  unit3: ['name', 'enabled', 'mask', 'contents', 'dropins'],
  coreUser: ['name', 'sshAuthorizedKeys', 'passwordHash'],
  directory2: ['filesystem', 'path', 'mode', 'user', 'group', 'overwrite'],
  directory3: ['path', 'mode', 'user', 'group', 'overwrite'],
  link2: ['filesystem', 'path', 'target', 'hard', 'user', 'group', 'overwrite'],
  link3: ['path', 'target', 'hard', 'user', 'group', 'overwrite'],
} as const;
const REFUSED_STORAGE = ['disks', 'filesystems', 'raid', 'luks'] as const;

export function emptyIgnitionConfig(): IgnitionConfig {
  return {
    ignition: { version: INTERNAL_IGNITION_VERSION },
    passwd: { users: [] },
    storage: { files: [] },
    systemd: { units: [] },
  };
}

/**
 * Converts a MachineConfig's spec.config to the internal form, reporting every problem into `c`.
 * Returns undefined when the config cannot be converted at all (wrong type, unknown version).
 */
export function parseIgnition(raw: unknown, c: ProblemCollector, field: string, budget: ContentsBudget = configBudget()): IgnitionConfig | undefined {
  if (raw === undefined || raw === null) return emptyIgnitionConfig();
  const config = c.record(raw, field);
  if (!config) return undefined;
  if (hasNoOwnKeys(config)) return emptyIgnitionConfig();

  const ign = c.record(config.ignition, field, 'ignition');
  const version = c.string(ign?.version, field, 'ignition.version');
  if (version === undefined) {
    c.add(join(field, 'ignition.version'), 'ignition-version',
      `required; supported versions: ${SUPPORTED_IGNITION_VERSIONS.join(', ')}`);
    return undefined;
  }
  if (!(SUPPORTED_IGNITION_VERSIONS as readonly string[]).includes(version)) {
    c.add(join(field, 'ignition.version'), 'ignition-version',
      `unsupported Ignition version "${version}"; supported versions: ${SUPPORTED_IGNITION_VERSIONS.join(', ')}`);
    return undefined;
  }
  const spec2 = version.startsWith('2.');

  c.onlyKeys(config, field, spec2 ? KEYS.top2 : KEYS.top3);
  if (ign) checkIgnitionSection(ign, c, join(field, 'ignition'));
  if (isNonEmpty(config.kernelArguments)) {
    c.add(join(field, 'kernelArguments'), 'ignition-kernel-arguments',
      'Ignition kernelArguments are applied only at first boot; use the MachineConfig field spec.kernelArguments');
  }
  const networkd = c.record(config.networkd, field, 'networkd');
  if (networkd && isNonEmpty(networkd.units)) {
    c.add(join(field, 'networkd.units'), 'networkd-refused',
      'networkd units are not supported (Ignition 3 has none); write them as files under /etc/systemd/network');
  }

  // Built here in emptyIgnitionConfig's key order rather than as one and then filled: an empty
  // config per MachineConfig, four objects thrown away, on every render.
  // A section that is not there is not read (nor its field path built).
  const users = config.passwd == null ? [] : parsePasswd(config.passwd, c, join(field, 'passwd'));
  const storage = parseStorage(config.storage, c, join(field, 'storage'), spec2, budget);
  const units = config.systemd == null ? [] : parseSystemd(config.systemd, c, join(field, 'systemd'), spec2);
  return {
    ignition: { version: INTERNAL_IGNITION_VERSION },
    passwd: { users },
    storage,
    systemd: { units },
  };
}

/** Object.keys(o).length === 0 without making the list. */
function hasNoOwnKeys(o: Raw): boolean {
  for (const key in o) if (Object.hasOwn(o, key)) return false;
  return true;
}

function checkIgnitionSection(ign: Raw, c: ProblemCollector, field: string): void {
  c.onlyKeys(ign, field, KEYS.ignition);
  // proxy, security and timeouts only matter for fetching remote resources, which are refused
  // anyway; accepting them empty or not keeps OpenShift-generated configs loading unmodified.
  const cfg = c.record(ign.config, field, 'config');
  if (!cfg) return;
  const merge = c.array(cfg.merge ?? cfg.append, field, 'config.merge');
  if (merge && merge.length > 0) {
    c.add(join(field, 'config.merge'), 'remote-config', 'merging a remote Ignition config is refused: a MachineConfig must be static');
  }
  const replace = c.record(cfg.replace, field, 'config.replace');
  if (replace && isNonEmpty(replace.source)) {
    c.add(join(field, 'config.replace.source'), 'remote-config', 'replacing the config from a remote source is refused: a MachineConfig must be static');
  }
}

function parsePasswd(raw: unknown, c: ProblemCollector, field: string): IgnitionUser[] {
  const passwd = c.record(raw, field);
  if (!passwd) return [];
  c.onlyKeys(passwd, field, ['users', 'groups']);
  if (isNonEmpty(passwd.groups)) {
    c.add(join(field, 'groups'), 'passwd-groups', 'groups cannot be created or changed after install');
  }
  const users = c.array(passwd.users, field, 'users') ?? [];
  const out: IgnitionUser[] = [];
  users.forEach((rawUser, i) => {
    const f = `${field}.users[${i}]`;
    const user = c.record(rawUser, f);
    if (!user) return;
    const name = c.string(user.name, f, 'name');
    if (name !== 'core') {
      c.add(join(f, 'name'), 'user-not-core', `user "${name ?? ''}" is refused: only the core user can be configured after install`);
      return;
    }
    for (const key of Object.keys(user)) {
      if (!(KEYS.coreUser as readonly string[]).includes(key) && isNonEmpty(user[key])) {
        c.add(join(f, key), 'core-user-field', `core user field "${key}" is refused: only sshAuthorizedKeys and passwordHash can change after install`);
      }
    }
    const u: IgnitionUser = { name: 'core' };
    const keys = c.stringList(user.sshAuthorizedKeys, f, 'sshAuthorizedKeys');
    if (keys) u.sshAuthorizedKeys = keys;
    const hash = c.string(user.passwordHash, f, 'passwordHash');
    if (hash !== undefined) u.passwordHash = hash;
    out.push(u);
  });
  return out;
}

function parseStorage(raw: unknown, c: ProblemCollector, field: string, spec2: boolean, budget: ContentsBudget): IgnitionConfig['storage'] {
  const storage = c.record(raw, field);
  if (!storage) return { files: [] };
  c.onlyKeys(storage, field, spec2 ? KEYS.storage2 : KEYS.storage3);
  for (const key of REFUSED_STORAGE) {
    if (isNonEmpty(storage[key])) {
      c.add(join(field, key), `storage-${key}`, `storage.${key} is refused: disk layout is set at install time and cannot change on a running host`);
    }
  }
  const files = parseKeyedList(c.array(storage.files, field, 'files') ?? [], c, `${field}.files`, spec2, FILES, budget);
  const out: IgnitionConfig['storage'] = { files };
  // MCO's day-1 constructs: Ignition makes them at first boot; the agent compares them across
  // updates with MCO's rule (reconcilable in update-engine.ts). They may not take a path a file
  // (or directory) of this config has; most configs have neither, and get no set of paths.
  let taken: Set<string> | undefined;
  const rawDirectories = c.array(storage.directories, field, 'directories') ?? [];
  if (rawDirectories.length > 0) {
    taken = new Set(files.map((f) => f.path));
    const directories = parseKeyedList(rawDirectories, c, `${field}.directories`, spec2, DIRECTORIES, taken);
    for (const d of directories) taken.add(d.path);
    if (directories.length) out.directories = directories;
  }
  const rawLinks = c.array(storage.links, field, 'links') ?? [];
  if (rawLinks.length > 0) {
    taken ??= new Set(files.map((f) => f.path));
    const links = parseKeyedList(rawLinks, c, `${field}.links`, spec2, LINKS, taken);
    if (links.length) out.links = links;
  }
  return out;
}

/** The fields a directory and a link share with a file: path, owner, overwrite; Ignition 2's root filesystem. */
function parseNode(node: Raw, c: ProblemCollector, f: string, spec2: boolean, taken: Set<string>): { path?: string; user?: IgnitionFileOwner; group?: IgnitionFileOwner; overwrite?: boolean } {
  if (spec2) {
    const fs = c.string(node.filesystem, f, 'filesystem');
    if (fs !== 'root') c.add(join(f, 'filesystem'), 'ignition2-filesystem', `filesystem "${fs ?? ''}" is refused: Ignition 2.x entries must be on the "root" filesystem`);
  }
  const path = c.string(node.path, f, 'path');
  if (path === undefined) c.add(join(f, 'path'), 'required', 'a path is required');
  else {
    const violation = managedPathViolation(path);
    if (violation) c.add(join(f, 'path'), violation.rule, violation.message);
    else if (taken.has(path)) c.add(join(f, 'path'), 'duplicate-path', `path ${quote(path)} is also a file or directory of this config`);
  }
  const out: { path?: string; user?: IgnitionFileOwner; group?: IgnitionFileOwner; overwrite?: boolean } = {};
  if (path !== undefined) out.path = path;
  const user = node.user == null ? undefined : parseOwner(node.user, c, join(f, 'user'));
  const group = node.group == null ? undefined : parseOwner(node.group, c, join(f, 'group'));
  if (user) out.user = user;
  if (group) out.group = group;
  const overwrite = c.boolean(node.overwrite, f, 'overwrite');
  if (overwrite !== undefined) out.overwrite = overwrite;
  return out;
}

function parseDirectory(raw: unknown, c: ProblemCollector, list: string, index: number, spec2: boolean, taken: Set<string>): IgnitionDirectory | undefined {
  const f = `${list}[${index}]`;
  const node = c.record(raw, f);
  if (!node) return undefined;
  const before = c.problems.length;
  c.onlyKeys(node, f, spec2 ? KEYS.directory2 : KEYS.directory3);
  const { path, ...rest } = parseNode(node, c, f, spec2, taken);
  const mode = c.integer(node.mode, f, 'mode');
  if (mode !== undefined && (mode < 0 || mode > MAX_FILE_MODE)) c.add(join(f, 'mode'), 'file-mode-range', `mode ${mode} (octal 0${mode.toString(8)}) is outside 0000-0777`);
  if (path !== undefined && c.problemsSince(before)) c.nameEntry(before, `directory ${quote(path)}`, join(f, 'path'));
  if (c.problems.length > before || path === undefined) return undefined;
  return { path, ...(mode !== undefined ? { mode } : {}), ...rest };
}

function parseLink(raw: unknown, c: ProblemCollector, list: string, index: number, spec2: boolean, taken: Set<string>): IgnitionLink | undefined {
  const f = `${list}[${index}]`;
  const node = c.record(raw, f);
  if (!node) return undefined;
  const before = c.problems.length;
  c.onlyKeys(node, f, spec2 ? KEYS.link2 : KEYS.link3);
  const { path, ...rest } = parseNode(node, c, f, spec2, taken);
  const target = c.string(node.target, f, 'target');
  if (!target) c.add(join(f, 'target'), 'required', 'a link needs a target');
  else {
    const control = controlCharacterViolation(target);
    if (control) c.add(join(f, 'target'), 'control-character', `target ${quote(target)} ${control}`);
  }
  const hard = c.boolean(node.hard, f, 'hard');
  if (path !== undefined && c.problemsSince(before)) c.nameEntry(before, `link ${quote(path)}`, join(f, 'path'));
  if (c.problems.length > before || path === undefined || !target) return undefined;
  return { path, target, ...(hard !== undefined ? { hard } : {}), ...rest };
}

/**
 * How one kind of keyed list entry is read (files and directories and links by path, units by
 * name). Module-level objects rather than closures made per config: esbuild's keepNames wraps
 * each such closure in a defineProperty call, a twentieth of the render benchmark's CPU.
 * `list` and `index` give the entry's field path, which is built only to report a problem.
 */
interface EntryKind<T, X> {
  parse(raw: unknown, c: ProblemCollector, list: string, index: number, spec2: boolean, extra: X): T | undefined;
  key(item: T): string;
  duplicate(c: ProblemCollector, item: T, list: string, index: number): void;
}

const FILES: EntryKind<IgnitionFile, ContentsBudget> = {
  parse: parseFile,
  key: (file) => file.path,
  duplicate: (c, file, list, index) => c.add(fieldAt(list, 'path', index), 'duplicate-path', `path ${quote(file.path)} appears more than once in this config`),
};

const sharedPathDuplicate = (c: ProblemCollector, entry: { path: string }, list: string, index: number): void =>
  c.add(fieldAt(list, 'path', index), 'duplicate-path', `path ${quote(entry.path)} appears more than once in this config (files, directories and links share paths)`);

const DIRECTORIES: EntryKind<IgnitionDirectory, Set<string>> = { parse: parseDirectory, key: (d) => d.path, duplicate: sharedPathDuplicate };
const LINKS: EntryKind<IgnitionLink, Set<string>> = { parse: parseLink, key: (l) => l.path, duplicate: sharedPathDuplicate };

const UNITS: EntryKind<IgnitionUnit, undefined> = {
  parse: parseUnit,
  key: (unit) => unit.name,
  duplicate: (c, unit, list, index) => c.add(fieldAt(list, 'name', index), 'duplicate-unit', `unit ${quote(unit.name)} appears more than once in this config`),
};

/**
 * Parses a list whose entries are keyed (files by path, units by name). Ignition 3 refuses a
 * duplicate key; Ignition 2.x allowed them and MCO's converter keeps the last one, as do we.
 */
function parseKeyedList<T, X>(list: unknown[], c: ProblemCollector, field: string, spec2: boolean, kind: EntryKind<T, X>, extra: X): T[] {
  const out: T[] = [];
  // Most lists are short (a MachineConfig has a few files): their keys are compared with the
  // entries already taken, as a Set of them (grown a step at a time) costs more than the
  // comparisons; a long list gets its Set once it is long enough for that to pay.
  let keys: Set<string> | undefined;
  let repeated = false;
  for (let i = 0; i < list.length; i++) {
    const item = kind.parse(list[i], c, field, i, spec2, extra);
    if (item === undefined) continue;
    const key = kind.key(item);
    if (keys === undefined && out.length >= SHORT_LIST) keys = new Set(out.map((taken) => kind.key(taken)));
    if (keys ? keys.has(key) : takenIn(out, key, kind)) {
      if (!spec2) {
        kind.duplicate(c, item, field, i);
        continue;
      }
      repeated = true;
    } else {
      keys?.add(key);
    }
    out.push(item);
  }
  return repeated ? lastOfEachKey(out, kind) : out;
}

/** How many entries a keyed list is checked for repeats by comparison before it gets a Set. */
const SHORT_LIST = 32;

function takenIn<T>(out: readonly T[], key: string, kind: EntryKind<T, unknown>): boolean {
  for (let j = 0; j < out.length; j++) if (kind.key(out[j]!) === key) return true;
  return false;
}

/** Ignition 2.x's repeated keys: the last entry of each, in the order of those last entries. */
function lastOfEachKey<T>(items: T[], kind: EntryKind<T, unknown>): T[] {
  const last = new Map<string, number>();
  items.forEach((item, i) => last.set(kind.key(item), i));
  return items.filter((item, i) => last.get(kind.key(item)) === i);
}

function parseFile(raw: unknown, c: ProblemCollector, list: string, i: number, spec2: boolean, budget: ContentsBudget): IgnitionFile | undefined {
  const file = c.record(raw, list, undefined, i);
  if (!file) return undefined;
  const before = c.problems.length;
  c.onlyKeys(file, list, spec2 ? KEYS.file2 : KEYS.file3, undefined, i);

  if (spec2) {
    const fs = c.string(file.filesystem, list, 'filesystem', i);
    if (fs !== 'root') {
      c.add(fieldAt(list, 'filesystem', i), 'ignition2-filesystem',
        `filesystem "${fs ?? ''}" is refused: Ignition 2.x files must be on the "root" filesystem`);
    }
  }
  if (file.append === true || (Array.isArray(file.append) && file.append.length > 0)) {
    c.add(fieldAt(list, 'append', i), 'file-append', 'append is refused: a managed file must have one full, known content');
  }

  const path = c.string(file.path, list, 'path', i);
  if (path === undefined) {
    c.add(fieldAt(list, 'path', i), 'required', 'a file needs a path');
  } else {
    const violation = managedPathViolation(path);
    if (violation) c.add(fieldAt(list, 'path', i), violation.rule, violation.message);
  }

  let mode = DEFAULT_FILE_MODE;
  const rawMode = c.integer(file.mode, list, 'mode', i);
  if (rawMode !== undefined) {
    if (rawMode < 0 || rawMode > MAX_FILE_MODE) {
      c.add(fieldAt(list, 'mode', i), 'file-mode-range',
        `mode ${rawMode} (octal 0${rawMode.toString(8)}) is outside 0000-0777: setuid, setgid and sticky bits are refused; ` +
        'in YAML write 0644 (read as octal) or 420 (decimal)');
    }
    mode = rawMode;
  }

  const source = parseContents(file.contents, c, list, i, budget);
  const user = file.user == null ? undefined : parseOwner(file.user, c, fieldAt(list, 'user', i));
  const group = file.group == null ? undefined : parseOwner(file.group, c, fieldAt(list, 'group', i));
  if (path !== undefined && c.problemsSince(before)) c.nameEntry(before, `file ${quote(path)}`, fieldAt(list, 'path', i));
  if (c.problems.length > before || path === undefined || source === undefined) return undefined;

  const out: IgnitionFile = { path, mode, overwrite: true, contents: { source } };
  if (user) out.user = user;
  if (group) out.group = group;
  return out;
}

/**
 * Reports contents over `limit` (the per-file limit or what the budget has left) and returns
 * undefined. A function of its own rather than a closure in parseContents, which runs for every
 * file: see ProblemCollector.nameEntry.
 */
function contentsTooLarge(c: ProblemCollector, list: string, i: number, limit: number, budget: ContentsBudget, what: string): undefined {
  const room = budget.tightest();
  c.add(fieldAt(list, 'contents.source', i), 'contents-size', `${what}, above the limit of ` + (limit === MAX_FILE_CONTENTS_BYTES
    ? `${describeBytes(MAX_FILE_CONTENTS_BYTES)} for one file`
    : `${describeBytes(room.budget.limit)} for ${room.budget.scope} (${describeBytes(room.budget.limit - room.left)} already used before this file)`));
  return undefined;
}

/** Returns the canonical data URL for the file's bytes, or undefined after reporting. The file is
 * entry `i` of `list`; its field paths are built only when reporting a problem. Decoding stops at
 * the tighter of the per-file limit and what is left of `budget`. */
function parseContents(raw: unknown, c: ProblemCollector, list: string, i: number, budget: ContentsBudget): string | undefined {
  const contents = c.record(raw, list, 'contents', i);
  if (!contents) return CANONICAL_DATA_URL_PREFIX; // a file with no contents is an empty file
  c.onlyKeys(contents, list, KEYS.contents, 'contents', i);
  const source = c.string(contents.source, list, 'contents.source', i) ?? '';
  const compression = c.string(contents.compression, list, 'contents.compression', i) ?? '';
  const verification = c.record(contents.verification, list, 'contents.verification', i);
  const expectedHash = c.string(verification?.hash, list, 'contents.verification.hash', i);
  if (isNonEmpty(contents.httpHeaders)) {
    c.add(fieldAt(list, 'contents.httpHeaders', i), 'remote-source', 'httpHeaders are refused: remote sources are not allowed');
  }
  if (compression !== '' && compression !== 'gzip') {
    c.add(fieldAt(list, 'contents.compression', i), 'compression', `compression "${compression}" is not supported (use "gzip" or none)`);
    return undefined;
  }
  if (source === '') return CANONICAL_DATA_URL_PREFIX;

  const limit = Math.min(MAX_FILE_CONTENTS_BYTES, budget.left());

  // Fast path: base64 with nothing to verify or decompress only needs its media type dropped;
  // decoding and re-encoding would give the same text at a large cost on big configs.
  if (compression === '' && !expectedHash && source.startsWith('data:')) {
    const comma = source.indexOf(',');
    if (comma > 0 && source.startsWith(';base64', comma - 7)) {
      const data = source.slice(comma + 1);
      if (isValidBase64(data)) {
        const size = base64DecodedLength(data);
        if (size > limit) return contentsTooLarge(c, list, i, limit, budget, `contents are ${describeBytes(size)}`);
        budget.charge(size);
        return comma === CANONICAL_DATA_URL_PREFIX.length - 1 ? source : CANONICAL_DATA_URL_PREFIX + data;
      }
    }
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(source)?.[1]?.toLowerCase();
  if (scheme !== 'data') {
    c.add(fieldAt(list, 'contents.source', i), 'remote-source',
      `source scheme "${scheme ?? source.slice(0, 20)}" is refused: a MachineConfig must be static, so contents must be a data: URL ` +
      '(remote http, https, s3, gs, tftp and arn sources would be fetched at apply time, unhashed)');
    return undefined;
  }
  // Compressed contents may decode to more than the limit and still inflate to less, so only the
  // inflated size is bounded by it; the compressed form can be no larger than the request itself.
  const decoded = decodeDataUrlBounded(source, compression === 'gzip' ? Infinity : limit);
  if ('tooLarge' in decoded) return contentsTooLarge(c, list, i, limit, budget, `contents decode to more than ${describeBytes(limit)}`);
  if ('error' in decoded) {
    c.add(fieldAt(list, 'contents.source', i), 'data-url', decoded.error);
    return undefined;
  }
  if (expectedHash) {
    const mismatch = verifyHash(decoded.bytes, expectedHash);
    if (mismatch) {
      c.add(fieldAt(list, 'contents.verification.hash', i), 'content-hash', mismatch);
      return undefined;
    }
  }
  let bytes = decoded.bytes;
  if (compression === 'gzip') {
    const inflated = gunzipBounded(bytes, limit);
    if ('tooLarge' in inflated) {
      return contentsTooLarge(c, list, i, limit, budget, `${describeBytes(bytes.length)} of gzip contents expand past ${describeBytes(limit)} (decompression stopped there)`);
    }
    if ('error' in inflated) {
      c.add(fieldAt(list, 'contents.compression', i), 'compression', `contents are not valid gzip: ${inflated.error}`);
      return undefined;
    }
    bytes = inflated.bytes;
  }
  if (bytes.length > limit) return contentsTooLarge(c, list, i, limit, budget, `contents are ${describeBytes(bytes.length)}`);
  budget.charge(bytes.length);
  return encodeDataUrl(bytes);
}

function verifyHash(bytes: Buffer, expected: string): string | undefined {
  const match = /^(sha256|sha512)-([0-9a-f]+)$/.exec(expected);
  if (!match) return `"${expected}" is not a hash Ignition understands (sha256-<hex> or sha512-<hex>)`;
  const actual = createHash(match[1]!).update(bytes).digest('hex');
  return actual === match[2] ? undefined : `contents do not match ${match[1]} ${match[2]} (actual ${actual})`;
}

function parseOwner(raw: unknown, c: ProblemCollector, f: string): IgnitionFileOwner | undefined {
  const owner = c.record(raw, f);
  if (!owner || Object.keys(owner).length === 0) return undefined;
  c.onlyKeys(owner, f, ['id', 'name']);
  const out: IgnitionFileOwner = {};
  const id = c.integer(owner.id, f, 'id');
  const name = c.string(owner.name, f, 'name');
  if (id !== undefined) out.id = id;
  if (name) out.name = name;
  return id === undefined && !name ? undefined : out;
}

function parseSystemd(raw: unknown, c: ProblemCollector, field: string, spec2: boolean): IgnitionUnit[] {
  const systemd = c.record(raw, field);
  if (!systemd) return [];
  c.onlyKeys(systemd, field, ['units']);
  return parseKeyedList(c.array(systemd.units, field, 'units') ?? [], c, `${field}.units`, spec2, UNITS, undefined);
}

function parseUnit(raw: unknown, c: ProblemCollector, list: string, index: number, spec2: boolean): IgnitionUnit | undefined {
  const f = `${list}[${index}]`;
  const unit = c.record(raw, f);
  if (!unit) return undefined;
  const before = c.problems.length;
  c.onlyKeys(unit, f, spec2 ? KEYS.unit2 : KEYS.unit3);
  const name = c.string(unit.name, f, 'name');
  if (name === undefined) c.add(join(f, 'name'), 'required', 'a unit needs a name');
  else checkUnitName(name, c, join(f, 'name'));

  const out: IgnitionUnit = { name: name ?? '' };
  const enabled = c.boolean(unit.enabled, f, 'enabled') ?? (spec2 && c.boolean(unit.enable, f, 'enable') ? true : undefined);
  if (enabled !== undefined) out.enabled = enabled;
  const mask = c.boolean(unit.mask, f, 'mask');
  if (mask !== undefined) out.mask = mask;
  const contents = c.string(unit.contents, f, 'contents');
  if (contents !== undefined) out.contents = contents;

  const dropins = c.array(unit.dropins, f, 'dropins') ?? [];
  const byName = new Map<string, IgnitionDropin>();
  dropins.forEach((rawDropin, j) => {
    const df = `${f}.dropins[${j}]`;
    const d = c.record(rawDropin, df);
    if (!d) return;
    const start = c.problems.length;
    parseDropin(d, c, df, byName);
    if (typeof d.name === 'string' && c.problemsSince(start)) c.nameEntry(start, `dropin ${quote(d.name)}`, join(df, 'name'));
  });
  if (byName.size > 0) out.dropins = [...byName.values()];
  if (name !== undefined && c.problemsSince(before)) c.nameEntry(before, `unit ${quote(name)}`, join(f, 'name'));
  return c.problems.length > before ? undefined : out;
}

/** Adds one dropin to `byName` (a later one with the same name replaces it), or reports why not. */
function parseDropin(d: Raw, c: ProblemCollector, df: string, byName: Map<string, IgnitionDropin>): void {
  c.onlyKeys(d, df, ['name', 'contents']);
  const dname = c.string(d.name, df, 'name');
  if (dname === undefined) {
    c.add(join(df, 'name'), 'required', 'a dropin needs a name');
    return;
  }
  const control = controlCharacterViolation(dname);
  if (control) {
    c.add(join(df, 'name'), 'control-character', `dropin name ${quote(dname)} ${control}`);
    return;
  }
  if (!/^[^/]+\.conf$/.test(dname)) {
    c.add(join(df, 'name'), 'dropin-name', `dropin name ${quote(dname)} must end in ".conf" and contain no "/"`);
    return;
  }
  const dropin: IgnitionDropin = { name: dname };
  const dcontents = c.string(d.contents, df, 'contents');
  if (dcontents !== undefined) dropin.contents = dcontents;
  byName.delete(dname);
  byName.set(dname, dropin);
}

// systemd's own set (unit_name_is_valid): anything else, a space included, systemd refuses, and
// the agent would only find out on the host, half-way through an update.
const UNIT_NAME_CHARACTERS = /^[A-Za-z0-9:_.\\@-]*$/;

function checkUnitName(name: string, c: ProblemCollector, f: string): void {
  const control = controlCharacterViolation(name);
  if (control) {
    c.add(f, 'control-character', `unit name ${quote(name)} ${control}`);
    return;
  }
  const valid = !name.includes('/') && SYSTEMD_UNIT_SUFFIXES.some((s) => name.endsWith(s) && name.length > s.length);
  if (!valid) {
    c.add(f, 'unit-name', `unit name ${quote(name)} must end in one of ${SYSTEMD_UNIT_SUFFIXES.join(' ')} and contain no "/"`);
    return;
  }
  const bad = [...name].find((ch) => !UNIT_NAME_CHARACTERS.test(ch));
  if (bad !== undefined) {
    c.add(f, 'unit-name-characters', `unit name ${quote(name)} contains ${bad === ' ' ? 'a space' : quote(bad)}; systemd unit names ` +
      'may contain only letters, digits and ":-_.\\@" (write other characters as \\xNN escapes, as systemd-escape does)');
  }
}

/** Converts the internal form to Ignition 2.2 for hosts that ask for it (the bootstrap endpoint). */
export function toIgnitionV2(config: IgnitionConfig): Record<string, unknown> {
  return {
    ignition: { version: '2.2.0' },
    passwd: { users: config.passwd.users },
    storage: {
      files: config.storage.files.map((f) => ({ filesystem: 'root', path: f.path, mode: f.mode, contents: f.contents, ...(f.user ? { user: f.user } : {}), ...(f.group ? { group: f.group } : {}) })),
      ...(config.storage.directories ? { directories: config.storage.directories.map((d) => ({ filesystem: 'root', ...d })) } : {}),
      ...(config.storage.links ? { links: config.storage.links.map((l) => ({ filesystem: 'root', ...l })) } : {}),
    },
    systemd: { units: config.systemd.units },
  };
}
