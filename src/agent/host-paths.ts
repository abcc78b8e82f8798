// Where a managed path really lands on this host. MachineConfig paths are checked as strings
// by the domain core; here they are resolved against the host's own symlinks (under the
// configured root), because /usr/local and /opt are writable only where CoreOS links them into
// /var. A path whose resolution leaves /etc and /var is refused, and no symlink that leads out
// of those trees is ever followed.

import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { basename, dirname, join, posix } from 'node:path';
import { isUnder, WRITABLE_ROOTS } from '../machineconfig/index.ts';

export type Resolution = { ok: true; hostPath: string; resolved: string } | { ok: false; reason: string };

const MAX_LINKS = 40;

/** Resolves `path` (absolute, inside the host) under `root`, following directory symlinks. */
export function resolveManagedPath(root: string, path: string): Resolution {
  let parts = path.split('/').filter(Boolean);
  let resolved: string[] = [];
  let links = 0;
  while (parts.length > 1) {
    const [head, ...rest] = parts;
    const candidate = [...resolved, head!];
    let stat;
    let target: string | undefined;
    // lstat then readlink: a link swapped in between makes readlink fail (EINVAL); look again,
    // a few times. Whatever this concludes, the writes re-walk the path without following links.
    for (let attempt = 1; ; attempt++) {
      try {
        stat = lstatSync(join(root, ...candidate));
      } catch {
        stat = undefined;
        break;
      }
      if (!stat.isSymbolicLink()) break;
      try {
        target = readlinkSync(join(root, ...candidate));
        break;
      } catch (err) {
        if (attempt >= 3) {
          return { ok: false, reason: `/${candidate.join('/')} changed while ${path} was being resolved (${(err as NodeJS.ErrnoException).code}); refusing to guess where it leads` };
        }
      }
    }
    if (!stat) {
      // Does not exist yet: it will be created as a directory, so the rest stays literal.
      resolved = [...candidate, ...rest.slice(0, -1)];
      parts = rest.slice(-1);
      break;
    }
    if (target !== undefined) {
      if (++links > MAX_LINKS) return { ok: false, reason: `too many levels of symbolic links resolving ${path}` };
      const base = target.startsWith('/') ? target : posix.join('/', ...resolved, target);
      parts = [...posix.normalize(base).split('/').filter(Boolean), ...rest];
      resolved = [];
      continue;
    }
    if (!stat.isDirectory()) return { ok: false, reason: `/${candidate.join('/')} is not a directory` };
    resolved = candidate;
    parts = rest;
  }
  const logical = '/' + [...resolved, ...parts].join('/');
  if (!isUnder(logical, WRITABLE_ROOTS)) {
    return {
      ok: false,
      reason: logical === path
        ? `${path} is outside /etc and /var on this host (it does not resolve into /var here, so it would land on the read-only OS image)`
        : `${path} resolves to ${logical}, outside /etc and /var; refusing to follow a symlink out of the writable trees`,
    };
  }
  return { ok: true, hostPath: join(root, logical), resolved: logical };
}

/**
 * The path with every symlink in its existing part resolved (what is missing stays literal), so
 * that writes can then walk it without following any link (no-follow-fs.ts).
 */
export function resolveExisting(path: string): string {
  const missing: string[] = [];
  let at = path;
  for (;;) {
    try {
      return join(realpathSync(at), ...missing.reverse());
    } catch (err) {
      const parent = dirname(at);
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || parent === at) throw err;
      missing.push(basename(at));
      at = parent;
    }
  }
}

/**
 * The core user's authorized_keys.d, resolved. core owns its home and can replace .ssh by a
 * symlink; a directory that resolves out of core's home is refused rather than written as root.
 */
export function resolveSshKeysDir(sshKeysDir: string): Resolution {
  const home = dirname(dirname(sshKeysDir));
  const realHome = resolveExisting(home);
  const real = resolveExisting(sshKeysDir);
  if (!real.startsWith(realHome + '/')) {
    return { ok: false, reason: `${sshKeysDir} resolves to ${real}, outside ${home}; refusing to follow a symlink out of the user's home` };
  }
  return { ok: true, hostPath: real, resolved: real };
}
