// The agent's hot paths, each beside a baseline measured in the same run:
//   files   apply 1,000 changed files through the crash-safe transaction, beside a plain
//           write+fsync+rename loop over the same files (goal: ratio <= 1.3)
//   drift   a full drift check of 1,000 managed files (goal: < 100 ms)
//   units   enable and start 50 units over D-Bus, beside 50 `systemctl enable --now` (goal <= 0.3),
//           with where the time goes and systemd's own share (all 50 in one `systemctl start`)
//   rss     the agent process idle, connected to a control plane, under each V8/Node setting
//           (goal: < 64 MiB; bench/agent-rss.ts)

import { closeSync, fsyncSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DriftMonitor } from '../src/agent/drift-monitor.ts';
import { FileTransaction, type DesiredFile } from '../src/agent/file-transaction.ts';
import { stepAdvance } from '../src/agent/step-advance.ts';
import { Failpoints } from '../src/agent/failpoints.ts';
import { Journal } from '../src/agent/journal.ts';
import { SystemdClient } from '../src/agent/systemd-client.ts';
import { applyUnitStates, runActions } from '../src/agent/unit-operations.ts';
import type { MachineConfigSpec } from '../src/machineconfig/index.ts';
import { createLogger } from '../src/runtime/logger.ts';
import { canRunUserSystemd, startUserSystemd } from '../sandbox/user-systemd.ts';
import { benchRss } from './agent-rss.ts';
import { ms, report } from './harness.ts';

const FILES = 1000;
const UNITS = 50;
const RUNS = Number(process.env.BENCH_RUNS ?? 9);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function files(dir: string, version: number): DesiredFile[] {
  return Array.from({ length: FILES }, (_, i) => ({
    hostPath: join(dir, `d${i % 20}`, `f${i}.conf`), object: `file /etc/bench/f${i}`,
    bytes: Buffer.from(`# file ${i}, version ${version}\n${'x'.repeat(200)}\n`), mode: 0o644,
  }));
}

function plainLoop(list: DesiredFile[]): void {
  for (const f of list) {
    const temp = `${f.hostPath}.tmp`;
    const fd = openSync(temp, 'w', f.mode);
    writeSync(fd, f.bytes);
    fsyncSync(fd);
    closeSync(fd);
    renameSync(temp, f.hostPath);
  }
}

export async function benchFiles(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), 'bench-files-'));
  const plainDir = join(base, 'plain');
  const txDir = join(base, 'tx');
  for (const d of [plainDir, txDir]) for (let i = 0; i < 20; i++) mkdirSync(join(d, `d${i}`), { recursive: true });
  const journal = new Journal(join(base, 'state'));
  const failpoints = new Failpoints('');
  const tx = new FileTransaction(journal, failpoints, stepAdvance(journal, failpoints));
  let version = 0;
  const apply = (list: DesiredFile[]): void => {
    journal.update((s) => {
      s.pending = { id: randomUUID().slice(0, 8), from: '', to: `v${version}`, toSpec: null as never, policy: null, driftPolicy: 'Degrade', step: 'check', force: false };
    });
    tx.stage(list, list.map((f) => f.hostPath), false);
    tx.commit();
    tx.finish();
    journal.update((s) => { s.pending = null; });
  };
  // Both trees start with version 0 on disk, so every round replaces existing files.
  plainLoop(files(plainDir, 0));
  apply(files(txDir, 0));
  const plain: number[] = [];
  const transaction: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    version++;
    const p = files(plainDir, version);
    const t = files(txDir, version);
    let start = performance.now();
    plainLoop(p);
    plain.push(performance.now() - start);
    start = performance.now();
    apply(t);
    transaction.push(performance.now() - start);
  }
  const ratio = median(transaction) / median(plain);
  report(`files: ${FILES} changed files, median of ${RUNS}`, [
    ['plain write+fsync+rename loop', ms(median(plain))],
    ['crash-safe transaction (journal, undo links, staged temps, renames, dir fsyncs)', ms(median(transaction))],
  ], { ratio, goal: '<= 1.30', ok: ratio <= 1.3 });

  // Drift: the full comparison of every managed file.
  const monitor = new DriftMonitor(createLogger({ level: 'silent' }), 3_600_000, () => undefined);
  const current = files(txDir, version);
  monitor.watch(current);
  const checks: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const start = performance.now();
    const found = await monitor.checkAll();
    checks.push(performance.now() - start);
    if (found.length) throw new Error('unexpected drift in the benchmark');
  }
  monitor.stop();
  report(`drift: full check of ${FILES} managed files, median of ${RUNS}`, [['check', `${ms(median(checks))}  (goal < 100 ms: ${median(checks) < 100 ? 'MET' : 'NOT MET'})`]]);
  rmSync(base, { recursive: true, force: true });
}

async function benchUnits(): Promise<void> {
  if (!canRunUserSystemd()) {
    console.log('\n== units: skipped (needs root to start a systemd user manager)');
    return;
  }
  const sd = await startUserSystemd();
  const body = '[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n[Install]\nWantedBy=default.target\n';
  for (let i = 0; i < UNITS; i++) {
    writeFileSync(join(sd.unitDir, `dbus-${i}.service`), body);
    writeFileSync(join(sd.unitDir, `cli-${i}.service`), body);
  }
  sd.systemctl('daemon-reload');
  const client = SystemdClient.connect(sd.busAddress);
  await client.subscribe();
  // What the agent does for a config with 50 enabled units and a policy that restarts them:
  // applyUnitStates (one EnableUnitFiles, one Reload) and runActions (the jobs at once).
  // Rounds alternate with the systemctl baseline; units are stopped and disabled in between.
  const names = Array.from({ length: UNITS }, (_, i) => `dbus-${i}.service`);
  const cliNames = Array.from({ length: UNITS }, (_, i) => `cli-${i}.service`);
  const spec = { config: { systemd: { units: names.map((name) => ({ name, enabled: true })) } } } as unknown as MachineConfigSpec;
  const dbusRuns: number[] = [];
  const cliRuns: number[] = [];
  // Where the agent's time goes: EnableUnitFiles and Reload (applyUnitStates), then the jobs
  // (runActions); and systemd's own share of the jobs, all 50 started by one systemctl call.
  const phases = { apply: [] as number[], jobs: [] as number[], oneCall: [] as number[] };
  for (let round = 0; round < 3; round++) {
    sd.systemctl('disable', '--now', ...names, ...cliNames);
    let start = performance.now();
    for (const unit of cliNames) sd.systemctl('enable', '--now', unit);
    cliRuns.push(performance.now() - start);
    start = performance.now();
    await applyUnitStates(client, null, spec, false);
    const applied = performance.now();
    await runActions(client, names.map((unit) => ({ type: 'restart' as const, unit })));
    dbusRuns.push(performance.now() - start);
    phases.apply.push(applied - start);
    phases.jobs.push(performance.now() - applied);
    sd.systemctl('stop', ...cliNames);
    start = performance.now();
    sd.systemctl('start', ...cliNames);
    phases.oneCall.push(performance.now() - start);
  }
  const dbusMs = median(dbusRuns);
  const cliMs = median(cliRuns);
  const active = sd.systemctl('is-active', ...Array.from({ length: UNITS }, (_, i) => `dbus-${i}.service`)).stdout.trim().split('\n');
  if (!active.every((s) => s === 'active')) throw new Error('not every unit started');
  client.close();
  await sd.stop();
  const ratio = dbusMs / cliMs;
  report(`units: enable and start ${UNITS} units, median of 3 alternating rounds`, [
    [`${UNITS} x systemctl --user enable --now`, ms(cliMs)],
    ['the agent over D-Bus (one EnableUnitFiles, one Reload, 50 concurrent jobs)', ms(dbusMs)],
    ['  of which EnableUnitFiles + Reload', ms(median(phases.apply))],
    ['  of which the 50 restart jobs', ms(median(phases.jobs))],
    [`systemd's own share: systemctl --user start of the ${UNITS} units in one call`, `${ms(median(phases.oneCall))}  (${(median(phases.oneCall) / cliMs).toFixed(2)}x the baseline: no client gets below it)`],
  ], { ratio, goal: '<= 0.30', ok: ratio <= 0.3 });
}

export async function run(): Promise<void> {
  await benchFiles();
  await new Promise((r) => setTimeout(r, 200));
  await benchUnits();
  if (canRunUserSystemd()) await benchRss();
  else console.log('\n== rss: skipped (needs root to start a systemd user manager)');
}
