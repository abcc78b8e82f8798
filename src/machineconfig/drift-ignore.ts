// A pool's spec.driftIgnore: paths and globs whose drift the agent watches for nothing (not
// reported, not rewritten, not degrading the node). Shared by the pool's parser (the rules, with
// errors naming the entry) and the agent (the matcher), so both read a glob the same way.
//
// The syntax is the shell's, per path segment: `*` any run of characters within a segment, `?`
// one character, `[abc]`, `[a-z]` and `[!abc]` one of (or none of) a set, and `**` as a whole
// segment any number of segments (none included). A trailing "/" means everything under the
// directory ("/etc/foo/" is "/etc/foo/**").

import { quote } from './control-characters.ts';
import type { ProblemCollector } from './problem-collector.ts';

/** Entries a pool may list: a host's hand-managed files are a handful of directories, not a tree. */
export const MAX_DRIFT_IGNORE_ENTRIES = 64;
export const MAX_DRIFT_IGNORE_CHARS = 1024;

// C0 controls, DEL, C1 controls.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Why `glob` is not a drift-ignore entry, or undefined when it is one. */
export function driftIgnoreProblem(glob: string): string | undefined {
  if (glob === '') return 'an entry may not be empty';
  if (glob.length > MAX_DRIFT_IGNORE_CHARS) return `${quote(glob, 60)} is longer than ${MAX_DRIFT_IGNORE_CHARS} characters`;
  if (CONTROL.test(glob)) return `${quote(glob, 60)} contains a control character`;
  if (!glob.startsWith('/')) return `${quote(glob, 60)} is not an absolute path: an entry starts with "/" (e.g. /etc/motd or /etc/chrony.d/*.conf)`;
  const segments = (glob.endsWith('/') && glob !== '/' ? glob.slice(1, -1) : glob.slice(1)).split('/');
  if (glob === '/') return '"/" would ignore every managed file: drop driftPolicy instead, or list the directories';
  for (const seg of segments) {
    if (seg === '') return `${quote(glob, 60)} has an empty path segment ("//")`;
    if (seg === '.' || seg === '..') return `${quote(glob, 60)} has a "${seg}" segment: write the path as the config names it`;
    if (seg.includes('**') && seg !== '**') return `${quote(glob, 60)}: "**" must be a whole path segment (/etc/**/x.conf), not part of ${quote(seg, 40)}`;
    const open = classProblem(seg);
    if (open) return `${quote(glob, 60)}: ${open}`;
  }
  return undefined;
}

function classProblem(seg: string): string | undefined {
  for (let i = 0; i < seg.length; i++) {
    if (seg[i] === '\\') return 'backslash escapes are not supported: a path in a config has no "*", "?" or "[" to escape';
    if (seg[i] !== '[') continue;
    const end = classEnd(seg, i);
    if (end < 0) return `the "[" at ${quote(seg, 40)} is never closed with "]"`;
    i = end;
  }
  return undefined;
}

/** The index of the "]" closing the class opened at `start`, or -1. */
function classEnd(seg: string, start: number): number {
  let i = start + 1;
  if (seg[i] === '!') i++;
  if (seg[i] === ']') i++; // a leading "]" is a member, as in the shell
  const end = seg.indexOf(']', i);
  return end;
}

/** Reads spec.driftIgnore: a list of valid, distinct entries; each problem names its entry. */
export function parseDriftIgnore(raw: unknown, c: ProblemCollector, field: string): string[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  const list = c.array(raw, field);
  if (!list) return undefined;
  if (list.length > MAX_DRIFT_IGNORE_ENTRIES) {
    c.add(field, 'max-items', `at most ${MAX_DRIFT_IGNORE_ENTRIES} paths or globs, got ${list.length}`);
    return undefined;
  }
  const out: string[] = [];
  list.forEach((entry, i) => {
    const glob = c.string(entry, `${field}[${i}]`);
    if (glob === undefined) return;
    const problem = driftIgnoreProblem(glob);
    if (problem) c.add(`${field}[${i}]`, 'drift-ignore', problem);
    else if (out.includes(glob)) c.add(`${field}[${i}]`, 'duplicate', `${quote(glob, 60)} is listed twice`);
    else out.push(glob);
  });
  return out;
}

/** A matcher for valid entries (the caller checked them); an invalid one matches nothing. */
export function driftIgnoreMatcher(globs: readonly string[]): (path: string) => boolean {
  const res = globs.filter((g) => !driftIgnoreProblem(g)).map(globToRegExp);
  if (res.length === 0) return () => false;
  return (path) => res.some((re) => re.test(path));
}

function globToRegExp(glob: string): RegExp {
  const full = glob.endsWith('/') ? `${glob}**` : glob;
  const segments = full.slice(1).split('/');
  let re = '^';
  segments.forEach((seg, i) => {
    const last = i === segments.length - 1;
    if (seg === '**') {
      // Any number of whole segments: "/a/**/b" matches /a/b and /a/x/y/b; "/a/**" anything under /a.
      re += last ? '(?:/.+)?' : '(?:/[^/]+)*';
      return;
    }
    re += '/';
    for (let j = 0; j < seg.length; j++) {
      const ch = seg[j]!;
      if (ch === '*') re += '[^/]*';
      else if (ch === '?') re += '[^/]';
      else if (ch === '[') {
        const end = classEnd(seg, j);
        let body = seg.slice(j + 1, end);
        const negate = body.startsWith('!');
        if (negate) body = body.slice(1);
        re += `[${negate ? '^/' : ''}${body.replace(/[\\\]^]/g, (m) => `\\${m}`)}]`;
        j = end;
      } else re += ch.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    }
  });
  return new RegExp(`${re}$`);
}
