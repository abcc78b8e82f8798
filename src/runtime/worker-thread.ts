// What the server's worker threads (the status thread, the etcd lease thread) share: where their
// program is, and their log lines logged again on the main thread.

import { pathToFileURL } from 'node:url';
import type { Logger } from './logger.ts';

declare const __MCPLANE_BUNDLED__: boolean | undefined;

/** Where a worker thread's program is, and the Node flags it runs with (absent: the parent's). */
export interface WorkerEntry {
  entry: URL;
  execArgv?: string[];
}

/**
 * The file a worker thread runs: from source, its own entry file; in a bundle, the bundle itself
 * (`bundleUrl`, the caller's import.meta.url), whose main module starts the program named by the
 * worker's workerData.role instead of the server.
 *
 * In the test suite's runs (MCPLANE_TEST_BUNDLES=1, which starts the programs from the bundles
 * the run has just built), MCPLANE_THREAD_BUNDLE names that server bundle, and the threads of
 * servers that test files run in their own process from source run from it instead, without the
 * parent's `--import tsx`: a thread started through tsx spends about 0.6 s of CPU loading the
 * loader and transforming its modules again (from the bundle, with the suite's compile cache, a
 * fraction of that). Outside those runs it is ignored: a bundle from another tree would speak
 * another version of the threads' messages.
 */
export function workerEntry(sourceEntry: URL, bundleUrl: string): WorkerEntry {
  if (typeof __MCPLANE_BUNDLED__ === 'boolean' && __MCPLANE_BUNDLED__) return { entry: new URL(bundleUrl) };
  const bundle = process.env.MCPLANE_THREAD_BUNDLE;
  if (bundle && process.env.MCPLANE_TEST_BUNDLES === '1') return { entry: pathToFileURL(bundle), execArgv: [] };
  return { entry: sourceEntry };
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
