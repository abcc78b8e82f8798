// mcctl's launcher: the file the packages run (dist/bundle/mcctl.cjs, built by scripts/build.ts).
// It runs the program, mcctl/main.cjs beside it, from a V8 code cache in the user's cache
// directory (runtime/code-cache.ts says why), one per verb. The cache is the user's own, never a
// shared directory such as /tmp, where another user could plant code; MCCTL_NO_CODE_CACHE=1 runs
// without one. Only Node's built-in modules may be imported here: this file starts every run.

import { homedir } from 'node:os';
import { join } from 'node:path';
import { enableCompileCache } from 'node:module';
import { runWithCodeCache } from '../runtime/code-cache.ts';

/** Under $XDG_CACHE_HOME (or ~/.cache): mcplane/mcctl-code-cache. */
function cacheRoot(): string | undefined {
  if (process.env.MCCTL_NO_CODE_CACHE === '1') return undefined;
  const base = process.env.XDG_CACHE_HOME || (homedir() && join(homedir(), '.cache'));
  return base ? join(base, 'mcplane') : undefined;
}

/**
 * The verb, which names the run's cache: the first word of the arguments that could be one. A
 * flag's value taken for it (`--context lab get`) only files the cache under another name.
 */
function cacheName(args: string[]): string {
  return args.find((a) => /^[a-z][a-z0-9-]{0,31}$/.test(a)) ?? 'default';
}

const root = cacheRoot();
// The packages mcctl loads only for one command (@kubernetes/client-node for `import`,
// @peculiar/x509 for `pki`) are bundles of their own under mcctl/vendor, loaded by require():
// Node's compile cache serves those.
if (root !== undefined) {
  try {
    enableCompileCache(join(root, 'mcctl-compile-cache'));
  } catch { /* no cache: only slower */ }
}
runWithCodeCache(join(__dirname, 'mcctl', 'main.cjs'), {
  cacheRoot: root === undefined ? undefined : join(root, 'mcctl-code-cache'),
  name: cacheName(process.argv.slice(2)),
});
