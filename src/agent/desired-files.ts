// What a rendered config means on this host's disk: every MachineConfig file at its resolved
// path, every unit file and dropin in the unit directory, and the core user's SSH keys. One
// list, so files, units and keys go through the same all-old-or-all-new transaction.

import { readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { createHash } from 'node:crypto';
import { decodeDataUrl, UpdateStepError, type IgnitionFileOwner, type MachineConfigSpec } from '../machineconfig/index.ts';
import type { AgentConfig } from './agent-config.ts';
import type { DesiredFile } from './file-transaction.ts';
import { resolveExisting, resolveManagedPath, resolveSshKeysDir, type Resolution } from './host-paths.ts';

export const SSH_KEYS_FILE = 'ignition';
export const SSH_KEYS_OBJECT = 'ssh keys of core';

export interface HostLayout {
  root: string;
  unitDir: string;
  sshKeysDir: string;
}

/**
 * The root and the unit directory are the host's own (only root can change them): their
 * symlinks are resolved once here, so every host path below is free of symlinks and the writes
 * can refuse any they meet.
 */
export function layoutOf(config: AgentConfig): HostLayout {
  return { root: resolveExisting(config.paths.root), unitDir: resolveExisting(config.paths.unitDir), sshKeysDir: config.paths.sshKeysDir };
}

export function desiredFiles(spec: MachineConfigSpec, layout: HostLayout): DesiredFile[] {
  const out: DesiredFile[] = [];
  const accounts = readAccounts(layout.root);
  const resolve = directoryMemo(layout.root);
  for (const f of spec.config.storage.files) {
    const object = `file ${f.path}`;
    const where = resolve(f.path);
    if (!where.ok) throw new UpdateStepError('check', object, where.reason);
    const decoded = decodeDataUrl(f.contents.source);
    if ('error' in decoded) throw new UpdateStepError('check', object, decoded.error);
    out.push({
      hostPath: where.hostPath, object, bytes: decoded.bytes, mode: f.mode,
      uid: ownerId(f.user, accounts.users, object, 'user'), gid: ownerId(f.group, accounts.groups, object, 'group'),
    });
  }
  for (const u of spec.config.systemd.units) {
    // A masked unit is a symlink to /dev/null that systemd makes; writing contents would block it.
    if (u.contents !== undefined && !u.mask) {
      out.push({ hostPath: join(layout.unitDir, u.name), object: `unit ${u.name}`, bytes: Buffer.from(u.contents), mode: 0o644 });
    }
    for (const d of u.dropins ?? []) {
      if (d.contents === undefined) continue;
      out.push({ hostPath: join(layout.unitDir, `${u.name}.d`, d.name), object: `dropin ${u.name}/${d.name}`, bytes: Buffer.from(d.contents), mode: 0o644 });
    }
  }
  const keys = spec.config.passwd.users.find((u) => u.name === 'core')?.sshAuthorizedKeys ?? [];
  if (keys.length > 0) {
    const core = accounts.users.get('core');
    const dir = resolveSshKeysDir(layout.sshKeysDir);
    if (!dir.ok) throw new UpdateStepError('check', 'ssh keys of core', dir.reason);
    out.push({
      hostPath: join(dir.hostPath, SSH_KEYS_FILE), object: SSH_KEYS_OBJECT, bytes: Buffer.from(keys.join('\n') + '\n'), mode: 0o600,
      ...(core ? { uid: core.id, gid: core.gid } : {}),
    });
  }
  return out;
}

/**
 * resolveManagedPath, once per directory: the files of one directory resolve the same way (a
 * link swapped between two of them cannot split them), and a config of many files costs one
 * walk per directory. Only the directories on the way are resolved, so the file name is kept.
 */
function directoryMemo(root: string): (path: string) => Resolution {
  const dirs = new Map<string, Resolution>();
  return (path) => {
    const dir = posix.dirname(path);
    const known = dirs.get(dir);
    if (known?.ok) {
      const resolved = posix.join(posix.dirname(known.resolved), posix.basename(path));
      return { ok: true, resolved, hostPath: join(root, resolved) };
    }
    const res = resolveManagedPath(root, path);
    if (res.ok) dirs.set(dir, res);
    return res;
  };
}

/** Host paths a spec manages, for "what did the old config manage" (never throws). */
export function managedPaths(spec: MachineConfigSpec | null, layout: HostLayout): string[] {
  if (!spec) return [];
  try {
    return desiredFiles(spec, layout).map((f) => f.hostPath);
  } catch {
    // The old config no longer resolves (the host changed under it): manage what still does.
    return spec.config.storage.files
      .map((f) => resolveManagedPath(layout.root, f.path))
      .flatMap((r) => (r.ok ? [r.hostPath] : []));
  }
}

export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

interface Accounts {
  users: Map<string, { id: number; gid: number }>;
  groups: Map<string, { id: number; gid: number }>;
}

function readAccounts(root: string): Accounts {
  const parse = (file: string): Map<string, { id: number; gid: number }> => {
    const map = new Map<string, { id: number; gid: number }>();
    let text = '';
    try {
      text = readFileSync(join(root, 'etc', file), 'utf8');
    } catch {
      return map;
    }
    for (const line of text.split('\n')) {
      const [name, , id, gid] = line.split(':');
      if (name && id !== undefined) map.set(name, { id: Number(id), gid: Number(gid ?? id) });
    }
    return map;
  };
  return { users: parse('passwd'), groups: parse('group') };
}

function ownerId(owner: IgnitionFileOwner | undefined, table: Map<string, { id: number }>, object: string, what: string): number | undefined {
  if (!owner) return undefined;
  if (owner.id !== undefined) return owner.id;
  const entry = table.get(owner.name!);
  if (!entry) throw new UpdateStepError('check', object, `${what} "${owner.name}" does not exist on this host`);
  return entry.id;
}
