// Two shapes of log, chosen by where stdout goes:
// - under systemd (JOURNAL_STREAM or INVOCATION_ID set) or into a pipe or file: pino JSON on
//   stdout, each line prefixed with a syslog priority `<N>` so journald sets PRIORITY; no pid,
//   hostname or time fields because journald records them already;
// - on a terminal (someone running mcplane-server or mcplane-agent by hand): human-readable,
//   timestamped, coloured lines from pino-pretty.
// MCPLANE_LOG_FORMAT=json|pretty overrides the choice. pino-pretty runs as a stream in this
// process, not as a pino transport: transports run in worker threads loaded by file name, which
// does not survive esbuild bundling.

import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

const PRIORITY: Record<string, number> = { fatal: 2, error: 3, warn: 4, info: 6, debug: 7, trace: 7 };

export type { Logger };

export type LogFormat = 'json' | 'pretty';

export interface LoggerOptions {
  level?: string;
  name?: string;
  /** Where lines go; stdout by default. Tests pass an array collector (always JSON). */
  write?: (line: string) => void;
  /** Default: MCPLANE_LOG_FORMAT, else pretty on a terminal outside systemd, else json. */
  format?: LogFormat;
}

/** Pretty only for a person at a terminal: systemd sets JOURNAL_STREAM/INVOCATION_ID for its services. */
export function defaultLogFormat(env: NodeJS.ProcessEnv = process.env, stdoutIsTTY = process.stdout.isTTY === true): LogFormat {
  if (env.MCPLANE_LOG_FORMAT === 'json' || env.MCPLANE_LOG_FORMAT === 'pretty') return env.MCPLANE_LOG_FORMAT;
  const underSystemd = !!env.JOURNAL_STREAM || !!env.INVOCATION_ID;
  return stdoutIsTTY && !underSystemd ? 'pretty' : 'json';
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? process.env.MCPLANE_LOG_LEVEL ?? 'info';
  const format = options.write ? 'json' : options.format ?? defaultLogFormat();
  if (format === 'pretty') {
    return pino(
      { level, name: options.name, base: undefined, timestamp: pino.stdTimeFunctions.epochTime },
      pretty({ colorize: process.stdout.isTTY === true, translateTime: 'SYS:yyyy-mm-dd HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true, sync: true, destination: 1 }),
    );
  }
  const write = options.write ?? ((line: string) => process.stdout.write(line));
  const stream = {
    write(line: string): void {
      const label = /"level":"(\w+)"/.exec(line)?.[1] ?? 'info';
      write(`<${PRIORITY[label] ?? 6}>${line}`);
    },
  };
  return pino(
    {
      level,
      name: options.name,
      base: undefined,
      timestamp: false,
      formatters: { level: (label) => ({ level: label }) },
    },
    stream,
  );
}
