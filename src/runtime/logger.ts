// pino JSON on stdout, each line prefixed with a syslog priority `<N>` so journald sets
// PRIORITY; no pid, hostname or time fields because journald records them already.
// (pino transports run in worker threads and do not survive bundling, hence a plain stream.)

import pino, { type Logger } from 'pino';

const PRIORITY: Record<string, number> = { fatal: 2, error: 3, warn: 4, info: 6, debug: 7, trace: 7 };

export type { Logger };

export interface LoggerOptions {
  level?: string;
  name?: string;
  /** Where lines go; stdout by default. Tests pass an array collector. */
  write?: (line: string) => void;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const write = options.write ?? ((line: string) => process.stdout.write(line));
  const stream = {
    write(line: string): void {
      const label = /"level":"(\w+)"/.exec(line)?.[1] ?? 'info';
      write(`<${PRIORITY[label] ?? 6}>${line}`);
    },
  };
  return pino(
    {
      level: options.level ?? process.env.MCPLANE_LOG_LEVEL ?? 'info',
      name: options.name,
      base: undefined,
      timestamp: false,
      formatters: { level: (label) => ({ level: label }) },
    },
    stream,
  );
}
