// A node:test reporter that prints nothing: it appends one JSON line per test file to the file
// named by MCPLANE_TEST_RECORD (the file's time as its process measured it, its counts, and why
// each skipped test was skipped), for scripts/test/summary.mjs to print the slowest files and the
// skips once every pass has run. Used beside the spec reporter by scripts/test.sh, whose files run
// through wrappers that set their store: MCPLANE_TEST_FILES (wrapper, store, file per line) names
// the file and store each wrapper stands for, and a file's pass is its store, with "-serial" for
// the lane of files run one at a time. When scripts/test.sh gave the file a CPU cgroup (fourth
// column), the record carries the CPU its processes used, read once the file's process is done.

import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';

export default async function* record(source) {
  const out = process.env.MCPLANE_TEST_RECORD;
  const lane = process.env.MCPLANE_TEST_PASS ?? '';
  const wrapped = new Map((process.env.MCPLANE_TEST_FILES ? readFileSync(process.env.MCPLANE_TEST_FILES, 'utf8') : '')
    .split('\n').filter(Boolean).map((line) => line.split('\t')).map(([wrapper, store, file, cgroup]) => [wrapper, { store, file, cgroup }]));
  const skips = new Map();
  for await (const event of source) {
    const { type, data } = event;
    if (type === 'test:skip' && data.file) {
      const list = skips.get(data.file) ?? [];
      list.push({ name: data.name, reason: typeof data.skip === 'string' ? data.skip : '' });
      skips.set(data.file, list);
    }
    // One summary per file (with process isolation), then one for the whole run without a file.
    if (type === 'test:summary' && data.file && out) {
      const { tests, passed, failed, cancelled, skipped, todo } = data.counts;
      const w = wrapped.get(data.file);
      const pass = w ? `${w.store}${lane === 'serial' ? '-serial' : ''}` : lane;
      appendFileSync(out, JSON.stringify({
        pass, file: w ? w.file : relative(process.cwd(), data.file), ms: Math.round(data.duration_ms),
        cpuMs: w?.cgroup ? cpuMs(w.cgroup) : undefined,
        tests, passed, failed, cancelled, skipped, todo, skips: skips.get(data.file) ?? [],
      }) + '\n');
    }
  }
  yield '';
}

/** CPU used in a cgroup so far, in ms: cgroup v1's cpuacct.usage (ns) or v2's cpu.stat (us). */
function cpuMs(cgroup) {
  try {
    if (existsSync(`${cgroup}/cpuacct.usage`)) return Math.round(Number(readFileSync(`${cgroup}/cpuacct.usage`, 'utf8')) / 1e6);
    const usec = /^usage_usec (\d+)$/m.exec(readFileSync(`${cgroup}/cpu.stat`, 'utf8'));
    return usec ? Math.round(Number(usec[1]) / 1000) : undefined;
  } catch {
    return undefined;
  }
}
