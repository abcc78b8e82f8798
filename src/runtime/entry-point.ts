// Whether this module is the program being run. From source: its file is argv[1]. In a
// bundle, each bundle is exactly one program, and the build defines __MCPLANE_BUNDLED__.

import { realpathSync } from 'node:fs';
import { McplaneError } from '../machineconfig/errors.ts';
import { fileURLToPath } from 'node:url';

declare const __MCPLANE_BUNDLED__: boolean | undefined;

export function isEntryPoint(importMetaUrl: string): boolean {
  if (typeof __MCPLANE_BUNDLED__ === 'boolean' && __MCPLANE_BUNDLED__) return true;
  if (!process.argv[1]) return false;
  try {
    return realpathSync(fileURLToPath(importMetaUrl)) === realpathSync(process.argv[1]);
  } catch {
    return false;
  }
}

/**
 * Runs a long-lived program's main when this module is the program: a failure to start is one
 * line on stderr (a stack only for what is not an McplaneError, i.e. a bug) and exit code 1.
 */
export function runProgram(importMetaUrl: string, name: string, main: (argv: string[]) => Promise<void>): void {
  if (!isEntryPoint(importMetaUrl)) return;
  main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`${name}: ${err instanceof McplaneError ? err.message : (err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}

/** Calls `stop` once on SIGTERM or SIGINT; the process exits with what it resolves to. */
export function onStopSignal(stop: (signal: string) => Promise<number>): void {
  let stopping = false;
  const handle = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    stop(signal).then((code) => process.exit(code), () => process.exit(1));
  };
  process.once('SIGTERM', () => handle('SIGTERM'));
  process.once('SIGINT', () => handle('SIGINT'));
}
