import { posix } from 'node:path';
import { AGENT_OWNED_ROOTS, LINKED_INTO_VAR_ROOTS, WRITABLE_ROOTS } from './constants.ts';
import { controlCharacterViolation, quote } from './control-characters.ts';

const DOT_SEGMENT = /\/\.\.?(\/|$)/;

/** Why a path may not be managed, or undefined when it may be. Pure string rules only: the
 * agent re-checks the path after resolving symlinks on the host itself. */
export function managedPathViolation(path: string): { rule: string; message: string } | undefined {
  const control = controlCharacterViolation(path);
  if (control) return { rule: 'control-character', message: `path ${quote(path)} ${control}` };
  if (!path.startsWith('/')) {
    return { rule: 'path-absolute', message: `path ${quote(path)} is relative; it must be absolute` };
  }
  // Checked on the normalized path, before the spelling rules below, so that "/etc//mcplane/x",
  // "/etc/./mcplane" and "/etc/mcplane/../mcplane/x" name the rule that matters.
  // Nearly every path is already in normal form (no "." or ".." segment, no empty one, no
  // trailing "/"), and normalizing it would only copy it: the render checks every file's path.
  const plain = !DOT_SEGMENT.test(path) && !path.includes('//') && !path.endsWith('/');
  const owned = agentOwnedRoot(plain ? path : posix.normalize(path));
  if (owned) {
    return {
      rule: 'path-agent-owned',
      message: `path ${quote(path)} ${owned.replacing ? `would replace the directory that holds ${owned.root}` : `is ${owned.exact ? '' : 'under '}${owned.root}`}, which ` +
        'belongs to mcplane-agent itself (its configuration and credential in /etc/mcplane, its journal in /var/lib/mcplane); ' +
        'a MachineConfig may not write there',
    };
  }
  if (!plain) {
    if (DOT_SEGMENT.test(path)) {
      return { rule: 'path-dot-segment', message: `path ${quote(path)} has a "." or ".." segment; write the path it means` };
    }
    return { rule: 'path-empty-segment', message: `path ${quote(path)} has an empty segment or a trailing "/"; it must name a file` };
  }
  if (isUnder(path, WRITABLE_ROOTS) || isUnder(path, LINKED_INTO_VAR_ROOTS)) return undefined;
  return {
    rule: 'path-writable-root',
    message:
      `path ${quote(path)} is outside /etc and /var: on an image-based host the rest of the tree is the ` +
      `read-only OS image (ostree) and would be replaced on the next update; /usr/local and /opt are ` +
      `also accepted because CoreOS links them into /var`,
  };
}

function agentOwnedRoot(normalized: string): { root: string; replacing: boolean; exact: boolean } | undefined {
  const path = normalized.length > 1 && normalized.endsWith('/') ? normalized.replace(/\/+$/, '') : normalized;
  for (const root of AGENT_OWNED_ROOTS) {
    if (path === root || isStrictlyUnder(path, root)) return { root, replacing: false, exact: path === root };
    // A file at /var/lib would have to replace the directory the journal lives in. (/etc and /var
    // themselves are refused by the writable-root rule, which says more.)
    if (isStrictlyUnder(root, path) && isUnder(path, WRITABLE_ROOTS)) return { root, replacing: true, exact: false };
  }
  return undefined;
}

export function isUnder(path: string, roots: readonly string[]): boolean {
  for (const root of roots) if (isStrictlyUnder(path, root) && path.length > root.length + 1) return true;
  return false;
}

// `path.startsWith(root + '/')` without building the joined string: the render checks every
// file's path against every root, and each join is a string to allocate and flatten.
function isStrictlyUnder(path: string, root: string): boolean {
  return path.length > root.length && path.charCodeAt(root.length) === 0x2f && path.startsWith(root);
}
