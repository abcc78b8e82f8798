// What the server's worker threads (the status thread, the etcd lease thread) share: where their
// program is, and their log lines logged again on the main thread.

import type { Logger } from './logger.ts';

declare const __MCPLANE_BUNDLED__: boolean | undefined;

/**
 * The file a worker thread runs: from source, its own entry file; in a bundle, the bundle itself
 * (`bundleUrl`, the caller's import.meta.url), whose main module starts the program named by the
 * worker's workerData.role instead of the server.
 */
export function workerEntry(sourceEntry: URL, bundleUrl: string): URL {
  if (typeof __MCPLANE_BUNDLED__ === 'boolean' && __MCPLANE_BUNDLED__) return new URL(bundleUrl);
  return sourceEntry;
}

/** A line of a thread's JSON log ("<6>{...}"), logged again by this thread's logger. */
export function relogThreadLine(log: Logger, line: string): void {
  try {
    const { level, msg, ...fields } = JSON.parse(line.replace(/^<\d>/, '')) as { level?: string; msg?: string } & Record<string, unknown>;
    const at = (['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const).find((l) => l === level) ?? 'info';
    log[at](fields, msg ?? '');
  } catch {
    log.info(line.trim());
  }
}
