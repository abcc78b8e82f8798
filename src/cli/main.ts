#!/usr/bin/env node
// mcctl: the command line for mcplane. Reads feel like `oc get mcp`; every failure ends with a
// message on stderr and a non-zero exit, never a stack trace.

import { Command, Option } from 'commander';
import { McplaneError } from '../machineconfig/index.ts';
import { renderCommand, validateCommand } from './commands/offline.ts';
import type { OutputFormat } from './output.ts';
import { VERSION } from './version.ts';

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

export function buildProgram(write: (text: string) => void): Command {
  const program = new Command('mcctl')
    .description('Configure fleets of image-based Linux hosts with MachineConfigs')
    .version(VERSION, '--version')
    .showHelpAfterError()
    .exitOverride();

  const output = (): Option => new Option('-o, --output <format>', 'output format').choices(['yaml', 'json']).default('yaml');

  program
    .command('render')
    .description('print the rendered config of a pool from local MachineConfig files (no server)')
    .requiredOption('-f, --filename <path>', 'file or directory of manifests; repeatable; - for stdin', collect)
    .requiredOption('--pool <name>', 'pool to render (master, worker, or a pool defined in the files)')
    .addOption(output())
    .action((opts: { filename: string[]; pool: string; output: OutputFormat }) => {
      write(renderCommand(opts.filename, opts.pool, opts.output));
    });

  program
    .command('validate')
    .description('check MachineConfig and MachineConfigPool files without rendering (no server)')
    .requiredOption('-f, --filename <path>', 'file or directory of manifests; repeatable; - for stdin', collect)
    .action((opts: { filename: string[] }) => {
      write(validateCommand(opts.filename));
    });

  return program;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram((text) => process.stdout.write(text));
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    const e = err as { code?: string; exitCode?: number; message?: string };
    if (typeof e.code === 'string' && e.code.startsWith('commander.')) {
      // commander already printed help/version or the usage error.
      return e.exitCode ?? 2;
    }
    if (err instanceof McplaneError) {
      process.stderr.write(`error: ${err.message}\n`);
      return 1;
    }
    process.stderr.write(`error: ${e.message ?? String(err)}\n`);
    return 1;
  }
}

if (import.meta.url === `file://${process.argv[1]}` || process.env.MCPLANE_CLI_MAIN === '1') {
  process.exitCode = await main(process.argv.slice(2));
}
