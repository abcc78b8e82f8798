// The flags a server build has, read from its --help, so that `--compare REF` can start an older
// commit's server with the same set-up as this one's: a flag one side lacks (61c6759 has neither
// --status-listen nor --lease-ttl) is left off both sides, and commander would refuse it anyway
// ("unknown option"), stopping the run at the old server's start.

import { spawnSync } from 'node:child_process';
import { programArgs, REPO_ROOT } from '../test/helpers/run-cli.ts';

/** Each long flag of a server's --help, and whether it takes a value (`--lease-ttl <seconds>`). */
export type ServerFlags = ReadonlyMap<string, boolean>;

/** Reads the flags of the server the bench would start now (MCPLANE_PROGRAM_MCPLANE_SERVER or this checkout's). */
export function serverFlags(): ServerFlags {
  const help = spawnSync(process.execPath, [...programArgs('mcplane-server'), '--help'], { cwd: REPO_ROOT, encoding: 'utf8' });
  if (help.status !== 0) throw new Error(`mcplane-server --help exited ${help.status}: ${help.stderr.trim()}`);
  return parseHelp(help.stdout);
}

export function parseHelp(text: string): ServerFlags {
  const flags = new Map<string, boolean>();
  for (const line of text.split('\n')) {
    const m = /^\s+(?:-\w, )?(--[\w-]+)( [<[])?/.exec(line);
    if (m) flags.set(m[1]!, m[2] !== undefined);
  }
  return flags;
}

/** The flags one side has and another lacks, to be left off every side. */
export function missingOnSomeSide(sides: readonly ServerFlags[]): string[] {
  const union = new Set(sides.flatMap((s) => [...s.keys()]));
  return [...union].filter((flag) => sides.some((s) => !s.has(flag))).sort();
}

/**
 * `args` without the flags named in `leaveOff` (and their values, as `known` says a flag takes
 * one): the set-up both sides of a comparison can run.
 */
export function leaveOffFlags(args: readonly string[], leaveOff: readonly string[], known: ServerFlags): string[] {
  if (!leaveOff.length) return [...args];
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const name = arg.startsWith('--') ? arg.split('=')[0]! : undefined;
    if (name === undefined || !leaveOff.includes(name)) {
      out.push(arg);
      continue;
    }
    if (!arg.includes('=') && known.get(name)) i++; // its value goes with it
  }
  return out;
}
