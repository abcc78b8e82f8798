// What the server's worker threads (the status thread, the etcd lease thread) share: how they
// start (where their program is), and their log lines logged again on the main thread.

import { pathToFileURL } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';
import type { Logger } from './logger.ts';

declare const __MCPLANE_BUNDLED__: boolean | undefined;

/**
 * Starts a worker thread. The file it runs: from source, its own entry file; in a bundle, the bundle itself
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
export function startWorker(sourceEntry: URL, bundleUrl: string, options: WorkerOptions): Worker {
  if (typeof __MCPLANE_BUNDLED__ === 'boolean' && __MCPLANE_BUNDLED__) return new Worker(new URL(bundleUrl), options);
  const bundle = process.env.MCPLANE_THREAD_BUNDLE;
  if (bundle && process.env.MCPLANE_TEST_BUNDLES === '1') return new Worker(pathToFileURL(bundle), { ...options, execArgv: [] });
  return new Worker(sourceEntry, options);
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
