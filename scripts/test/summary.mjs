// Reads the record scripts/test/reporter.mjs wrote over every pass of scripts/test.sh and prints
// the 15 slowest test files with their times, the passes' totals, and every skipped test with its
// reason. Exit status 1 when a test was skipped: the suite runs every real part, so a test that
// cannot run here (not root, a missing Debian package) fails the run instead of passing silently.
// MCPLANE_TEST_ALLOW_SKIPS=1 lets skips through (still listed).

import { readFileSync } from 'node:fs';

const [recordFile, wallFile] = process.argv.slice(2);
const rows = readFileSync(recordFile, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const secs = (ms) => (ms / 1000).toFixed(1).padStart(6) + ' s';

// CPU is there when scripts/test.sh could give each file a cgroup (root): the files that cost the
// run the most are those using the most CPU, since the suite is CPU-bound on two cores.
const withCpu = rows.some((r) => r.cpuMs !== undefined);
const cpu = (r) => (r.cpuMs === undefined ? '' : `${secs(r.cpuMs)} CPU  `);
console.log(`\nslowest test files (time in the file's own process${withCpu ? ', and the CPU of every process it started' : ''}):`);
for (const r of [...rows].sort((a, b) => b.ms - a.ms).slice(0, 15)) console.log(`${secs(r.ms)}  ${cpu(r)}${r.pass.padEnd(18)} ${r.file}`);
if (withCpu) {
  console.log('\nthe test files using the most CPU:');
  for (const r of [...rows].sort((a, b) => (b.cpuMs ?? 0) - (a.cpuMs ?? 0)).slice(0, 15)) console.log(`${secs(r.cpuMs ?? 0)} CPU  ${secs(r.ms)}  ${r.pass.padEnd(18)} ${r.file}`);
}

const passes = new Map();
for (const r of rows) {
  const p = passes.get(r.pass) ?? { files: 0, tests: 0, failed: 0, skipped: 0, ms: 0, cpuMs: 0 };
  p.files++; p.tests += r.tests; p.failed += r.failed + r.cancelled; p.skipped += r.skipped; p.ms += r.ms; p.cpuMs += r.cpuMs ?? 0;
  passes.set(r.pass, p);
}
const walls = new Map(wallFile ? readFileSync(wallFile, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ')).map(([p, s]) => [p, Number(s)]) : []);
console.log('\npasses:');
for (const [name, p] of passes) {
  console.log(`  ${name.padEnd(18)} ${p.files} files, ${p.tests} tests, ${p.failed} failed, ${p.skipped} skipped (files' times add up to ${Math.round(p.ms / 1000)} s${withCpu ? `, their CPU to ${Math.round(p.cpuMs / 1000)} s` : ''})`);
}
// Wall times: the lanes ran side by side, the typecheck beside them.
for (const [name, s] of walls) if (name !== 'total') console.log(`  ${(name + ' lane').padEnd(18)} ${s} s wall`);
if (walls.has('total')) console.log(`  total wall time: ${Math.floor(walls.get('total') / 60)} min ${walls.get('total') % 60} s`);

// One plain closing line over every pass, for whoever reads only the end of the log.
const all = [...passes.values()].reduce((t, p) => ({ tests: t.tests + p.tests, failed: t.failed + p.failed, skipped: t.skipped + p.skipped }), { tests: 0, failed: 0, skipped: 0 });
const closing = `${all.tests - all.failed - all.skipped} passed, ${all.failed} failed, ${all.skipped} skipped`;

const skipped = rows.flatMap((r) => r.skips.map((s) => ({ ...s, file: r.file, pass: r.pass })));
if (skipped.length) {
  console.log(`\n${skipped.length} skipped test(s):`);
  for (const s of skipped) console.log(`  ${s.pass}: ${s.file}: ${s.name}: ${s.reason || '(no reason given)'}`);
  if (process.env.MCPLANE_TEST_ALLOW_SKIPS !== '1') {
    console.log('the run fails: every test must run (set MCPLANE_TEST_ALLOW_SKIPS=1 to accept skips)');
    console.log(`\n${closing}`);
    process.exit(1);
  }
}

console.log(`\n${closing}`);
if (all.failed > 0) process.exitCode = 1;
