// One node update, as MCO's daemon does it, with every step reported as a phase:
//
//   check     the change is reconcilable and every path resolves on this host
//   diff      what changes, by category
//   plan      what that costs: actions, or a reboot (the pool's disruption policy)
//   apply     files, units and keys in one transaction; then units; then rpm-ostree
//   reboot    only if the plan says so, through logind, after the journal records it
//   validate  the disk, systemd and the booted deployment match the config
//   health    the pool's health gate (spec.healthCheck): units active, a command succeeds
//   done      currentConfig advances
//
// Each phase is also written to the journal's timeline of the update (currentUpdate) with its
// start and end, so the record survives a restart and the reboot; a finished update moves to
// lastUpdate with its result, which the status report carries to the control plane's history.
//
// The steps, the phases each reports, and what a failure at each means are one table
// (update-steps.ts); #resume walks it from the step the journal names.
//
// A failure names the step, the object and the cause. Before the reboot it is undone at once
// (files, the units' states, the password, a staged deployment); an update whose reboot or
// validation failed is kept, and undone when another config replaces it.
// A failed health gate puts the node back as it was (files, units, password, rpm-ostree's
// previous deployment and a reboot when the update rebooted) and reports it RolledBack; it does
// not take that config again until an operator forces it or another config comes.

import { randomBytes } from 'node:crypto';
import { fchmodSync, fchownSync, readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import {
  day1StorageChange,
  diffSpecs,
  endPhase,
  enterPhase,
  finishUpdate,
  planDisruption,
  splitKernelArguments,
  startUpdate,
  UnreconcilableError,
  UpdateStepError,
  type DisruptionAction,
  type DisruptionPolicy,
  type DriftPolicy,
  type HealthCheck,
  type MachineConfigSpec,
  type NodeState,
} from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import { desiredFiles, layoutOf, managedPaths, sha256, SSH_KEYS_OBJECT, type HostLayout } from './desired-files.ts';
import { inParentOf, openDirNoFollow } from './no-follow-fs.ts';
import { FileTransaction, matchesOnDisk, type DesiredFile } from './file-transaction.ts';
import type { Failpoints } from './failpoints.ts';
import type { AgentConfig } from './agent-config.ts';
import type { Journal, PendingUpdate, UndonePath } from './journal.ts';
import { applyOsChanges, osMismatches } from './os-operations.ts';
import { applyPasswordHash, LOCKED, passwordHashOf, shadowHashOfCore } from './password.ts';
import type { Rebooter } from './reboot.ts';
import type { RpmOstree } from './rpm-ostree.ts';
import type { SystemdClient } from './systemd-client.ts';
import { applyUnitStates, describeUnitMismatch, retireRemovedUnits, runActions, undoAddedUnits, unitMismatches, unitStatesToRemember } from './unit-operations.ts';
import { runHealthGate } from './health-gate.ts';
import { keptAfterFailure, stepNamed, type StepOutcome, type StepRunner, type UpdatePhase } from './update-steps.ts';

export interface Assignment {
  config: string;
  spec: MachineConfigSpec;
  policy: DisruptionPolicy | null;
  driftPolicy: DriftPolicy;
  /** The pool's health gate (spec.healthCheck); null for none. */
  healthCheck?: HealthCheck | null;
}

export interface Progress {
  state: NodeState;
  /** One of the phases the step table reports (a failure names the phase it happened in). */
  phase: UpdatePhase;
  reason: string;
  desiredConfig: string;
}

export interface EngineDeps {
  config: AgentConfig;
  journal: Journal;
  systemd: SystemdClient;
  rpmOstree: RpmOstree;
  rebooter: Rebooter;
  failpoints: Failpoints;
  log: Logger;
  /** Called on every phase or state change. */
  onProgress: (p: Progress) => void;
  /** Staging before the drain (os-staging.ts): the disk check before the OS apply, and whether it may go --cache-only. */
  staging?: { cacheOnlyFor(config: string): boolean; checkBeforeApply(config: string, spec: MachineConfigSpec): Promise<void> };
}

export class UpdateEngine {
  readonly #d: EngineDeps;
  readonly #layout: HostLayout;
  readonly #files: FileTransaction;
  #running: Promise<void> | undefined;
  #next: { assignment: Assignment; force: boolean } | undefined;
  /** The step running now, for its deadline. */
  #step: { step: UpdatePhase; object: string; startedAt: number } | undefined;
  /** Work that ran past its deadline and has still not returned (a hung call or command). */
  #abandoned = new Map<Promise<unknown>, string>();
  /** Said in the node's reason while the update it concerns runs (a journal recovery). */
  #note = '';
  progress: Progress;

  constructor(deps: EngineDeps) {
    this.#d = deps;
    this.#layout = layoutOf(deps.config);
    this.#files = new FileTransaction(deps.journal, deps.failpoints);
    const s = deps.journal.state;
    // A note about the update in progress survives its reboot.
    this.#note = s.pending?.note ?? '';
    if (s.recovered) {
      this.#note = recoveryNote(s.recovered);
      deps.log.warn({ journal: deps.journal.path, movedTo: s.recovered.movedTo, cause: s.recovered.cause }, 'the journal was corrupt and has been moved aside; the disk will be checked against the desired config');
    }
    this.progress = s.recovered
      ? { state: 'Working', phase: 'check', reason: `${this.#note}; waiting for the desired config to check the disk against it`, desiredConfig: '' }
      : s.failure
      ? { state: s.failure.state, phase: s.failure.phase, reason: s.failure.reason, desiredConfig: s.pending?.to ?? s.failure.config ?? s.currentConfig }
      : s.pending
        ? { state: 'Working', phase: stepNamed(s.pending.step).reports[0], reason: '', desiredConfig: s.pending.to }
        : { state: 'Done', phase: 'done', reason: '', desiredConfig: s.currentConfig };
  }

  get busy(): boolean {
    return this.#running !== undefined;
  }

  /** Resolves when no update is running (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  /** Takes an assignment from the control plane; a running update finishes first. */
  assign(assignment: Assignment, force = false): void {
    const s = this.#d.journal.state;
    const current = !s.pending && !s.failure && s.currentConfig === assignment.config;
    if (current && !force) return;
    // Rolled back from this very config: an operator's re-apply or another config, not a retry loop.
    if (!force && !s.pending && s.failure?.state === 'RolledBack' && s.failure.config === assignment.config) return;
    if (s.pending && s.pending.to === assignment.config && !force && !this.#running) {
      this.#start(() => this.#resume());
      return;
    }
    if (this.#running) {
      this.#next = { assignment, force };
      return;
    }
    this.#start(() => this.#run(assignment, force));
  }

  /** At start-up: finish or undo whatever a crash or a reboot interrupted. */
  resumeAfterRestart(): void {
    if (this.#d.journal.state.pending) this.#start(() => this.#resume());
  }

  #start(work: () => Promise<void>): void {
    this.#running = work()
      .catch((err: unknown) => this.#d.log.error({ err }, 'update failed unexpectedly'))
      .finally(() => {
        this.#running = undefined;
        const next = this.#next;
        this.#next = undefined;
        if (next) this.assign(next.assignment, next.force);
      });
  }

  /**
   * Why the update loop is stuck, or undefined: a step running past its deadline, or work given
   * up at its deadline that has still not returned. The watchdog stops being fed while this
   * holds, so systemd restarts the agent and the journal takes it from there.
   */
  stuck(): string | undefined {
    const first = this.#abandoned.values().next();
    if (!first.done) return first.value;
    const limit = this.#d.config.stepTimeoutSeconds * 1000;
    if (this.#step && Date.now() - this.#step.startedAt > limit) {
      return `${this.#step.step}: ${this.#step.object}: running for ${Math.round((Date.now() - this.#step.startedAt) / 1000)}s, past its deadline of ${limit / 1000}s`;
    }
    return undefined;
  }

  /**
   * Runs one step's work with a deadline (stepTimeoutSeconds). Past it the step fails, naming
   * itself and the object, and the work is remembered as abandoned until it returns.
   */
  async #within<T>(step: UpdatePhase, object: string, work: () => Promise<T>): Promise<T> {
    const limit = this.#d.config.stepTimeoutSeconds * 1000;
    const outer = this.#step;
    this.#step = { step, object, startedAt: Date.now() };
    const running = work();
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([running, new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const what = `${step}: ${object}: gave up after ${limit / 1000}s (stepTimeoutSeconds) and it has not returned since`;
          const tracked = running.then(() => undefined, () => undefined).finally(() => this.#abandoned.delete(tracked));
          this.#abandoned.set(tracked, what);
          reject(new UpdateStepError(step, object, `did not finish within ${limit / 1000}s (stepTimeoutSeconds)`));
        }, limit);
      })]);
    } finally {
      clearTimeout(timer);
      this.#step = outer;
    }
  }

  /** Says why a running step waits (rpm-ostree busy), without changing state or phase. */
  note(reason: string): void {
    if (this.#running) this.#report(this.progress.state, this.progress.phase, reason);
  }

  /** Marks the node failed outside an update (drift, an invalid assignment). */
  markFailed(state: NodeState, phase: UpdatePhase, reason: string): void {
    this.#d.journal.update((s) => { s.failure = { state, phase, reason }; });
    this.#report(state, phase, reason);
  }

  #report(state: NodeState, phase: UpdatePhase, reason = this.#note): void {
    this.#recordPhase(state, phase);
    const s = this.#d.journal.state;
    this.progress = { state, phase, reason, desiredConfig: s.pending?.to ?? s.failure?.config ?? s.currentConfig };
    this.#d.onProgress(this.progress);
  }

  /** A new phase of the pending update goes into its timeline before anyone hears of it. */
  #recordPhase(state: NodeState, phase: UpdatePhase): void {
    const j = this.#d.journal;
    const p = j.state.pending;
    if (state !== 'Working' || !p || phase === 'done') return;
    const now = Date.now();
    const record = j.state.currentUpdate ?? startUpdate(`${p.id}-${randomBytes(2).toString('hex')}`, p.from, p.to, now);
    if (j.state.currentUpdate && !enterPhase(record, phase, now)) return;
    if (!j.state.currentUpdate) enterPhase(record, phase, now);
    j.update((s) => { s.currentUpdate = record; });
  }

  async #run(a: Assignment, force: boolean): Promise<void> {
    const j = this.#d.journal;
    if (j.state.recovered) {
      if (await this.#recover(a)) return;
    } else {
      this.#note = '';
    }
    // An update that did not finish (its reboot failed, its validation failed) is undone before
    // the new one is planned from the current config: finishing it instead would keep its files,
    // units and keys, forget the originals it took over and plan from a config the disk is not on.
    const undone = j.state.pending ? await this.#undoUnfinished(a.config) : [];
    j.update((s) => {
      const now = Date.now();
      // An update still open here was overtaken before it finished (waiting for its reboot).
      if (s.currentUpdate) s.lastUpdate = finishUpdate(s.currentUpdate, 'Superseded', `superseded by an update to ${a.config} before it finished`, now);
      const id = randomBytes(4).toString('hex');
      s.pending = {
        id, from: s.currentConfig, to: a.config, toSpec: a.spec,
        policy: a.policy, driftPolicy: a.driftPolicy, healthCheck: a.healthCheck ?? null, step: 'check', force,
        ...(this.#note ? { note: this.#note } : {}),
        ...(undone.length ? { undone } : {}),
      };
      s.currentUpdate = startUpdate(`${id}-${randomBytes(2).toString('hex')}`, s.currentConfig, a.config, now);
    });
    this.#d.log.info({ from: j.state.currentConfig || undefined, to: a.config, force }, 'update started');
    await this.#resume();
  }

  /**
   * Runs the pending update from the step the journal says it reached, one entry of the step
   * table (update-steps.ts) after another, until one waits for the reboot or the update is over.
   */
  async #resume(): Promise<void> {
    const j = this.#d.journal;
    try {
      if (j.state.pending!.undoing) {
        // Killed while undoing an unfinished update for a new config: finish the undo; the new
        // config comes again with the session's next assignment.
        await this.#undoUnfinished(j.state.pending!.to);
        return;
      }
      for (;;) {
        const step = j.state.pending!.step;
        const outcome = await stepNamed(step).run(this.#runner);
        if (outcome !== 'next') return;
        if (j.state.pending?.step === step) throw new UpdateStepError(this.progress.phase, 'agent', `step ${step} ended without moving the update on`);
      }
    } catch (err) {
      await this.#fail(err);
    } finally {
      this.#files.release();
    }
  }

  /** The engine's work as the step table calls it. */
  readonly #runner: StepRunner = {
    checkAndApplyFiles: async () => { await this.#checkAndApplyFiles(); return 'next'; },
    abandonStaged: async () => { this.#files.abandonStaged(); return 'next'; },
    commitFiles: async () => { this.#files.commit(); return 'next'; },
    applyUnits: async () => { await this.#applyUnits(); return 'next'; },
    applyOs: async () => { await this.#applyOs(); return 'next'; },
    actionsOrReboot: () => this.#actionsOrReboot(),
    rebootOrContinue: async () => {
      const j = this.#d.journal;
      if (this.#bootId() === j.state.pending!.rebootFromBootId) {
        await this.#reboot(); // the reboot has not happened yet
        return 'wait';
      }
      // The agent is back on the new boot: that is where the reboot phase ends.
      j.update((s) => {
        s.pending!.step = 'validating';
        if (s.currentUpdate) endPhase(s.currentUpdate, Date.now());
      });
      return 'next';
    },
    validate: () => this.#validateAndFinish(),
    healthGate: () => this.#healthGate(),
    rollBackNode: async () => {
      await this.#rollBackNode();
      if (this.#d.journal.state.pending!.step === 'rollback-rebooting') return 'wait'; // the process ends with the machine
      this.#recordRolledBack();
      return 'finished';
    },
    rollbackRebootOrFinish: async () => {
      if (this.#bootId() === this.#d.journal.state.pending!.rebootFromBootId) {
        await this.#reboot(); // the reboot has not happened yet
        return 'wait';
      }
      this.#recordRolledBack();
      return 'finished';
    },
    undoHost: () => this.#undoHost(),
    undoActions: async () => {
      await this.#undoHost();
      // Bring the services back on the old files too.
      await runActions(this.#d.systemd, this.#actionsToRun()).catch(() => undefined);
    },
  };

  async #checkAndApplyFiles(): Promise<void> {
    const j = this.#d.journal;
    const p = j.state.pending!;
    const from = j.state.currentSpec;
    this.#report('Working', 'check');
    if (from && from.fips !== p.toSpec.fips) {
      throw new UnreconcilableError('check', 'spec.fips', `changing FIPS mode from ${from.fips} to ${p.toSpec.fips} after install is not supported; reprovision the host`);
    }
    // MCO's day-1 directories and links: Ignition made them at first boot; a later change is
    // refused with MCO's own reason (removing every link is allowed and changes nothing here).
    const day1 = from ? day1StorageChange(from, p.toSpec) : undefined;
    if (day1) throw new UnreconcilableError('check', day1.field, `${day1.reason}; directories and links are made by Ignition at first boot, reprovision the host to change them`);
    const desired = desiredFiles(p.toSpec, this.#layout);

    this.#report('Working', 'diff');
    const diff = diffSpecs(from ?? undefined, p.toSpec);
    this.#report('Working', 'plan');
    const planned = planDisruption(diff, p.policy ?? undefined);
    // Undoing an unfinished update put rpm-ostree's previous deployment first: only a reboot boots it.
    const undoReboot = j.state.undoReboot;
    const plan = undoReboot ? { ...planned, reboot: true, rebootReasons: [...planned.rebootReasons, undoReboot] } : planned;
    j.update((s) => { s.pending!.plan = plan; });
    this.#d.log.info({ to: p.to, reboot: plan.reboot, reasons: plan.rebootReasons, actions: plan.actions, files: diff.files.length, units: diff.units.length }, 'update planned');

    this.#report('Working', 'apply');
    const previous = managedPaths(from, this.#layout);
    await this.#within('apply', 'units the new config drops', () => retireRemovedUnits(this.#d.systemd, from, p.toSpec));
    // A failure here is undone by the step table's undo for the step the journal reached
    // (staging: the temps go; committing: forward, then back).
    try {
      this.#files.stage(desired, previous, p.force);
      this.#files.commit();
    } catch (err) {
      throw new UpdateStepError('apply', objectOf(err, desired), (err as Error).message);
    }
    secureSshDirectory(desired);
  }

  async #applyUnits(): Promise<void> {
    const j = this.#d.journal;
    const p = j.state.pending!;
    this.#report('Working', 'apply');
    const unitFilesChanged = (p.fileOps ?? []).some((op) => op.hostPath.startsWith(this.#layout.unitDir + '/'));
    // Remembered once, before any change (a restart re-runs this step after some of them).
    if (!p.unitsBefore) {
      const before = await this.#within('apply', 'unit states before the update', () => unitStatesToRemember(this.#d.systemd, j.state.currentSpec, p.toSpec));
      j.update((s) => { s.pending!.unitsBefore = before; });
    }
    await this.#applyStep('units-done', 'systemd units and the password of core', async () => {
      await applyUnitStates(this.#d.systemd, j.state.currentSpec, p.toSpec, unitFilesChanged);
      if (await applyPasswordHash(this.#layout.root, j.state.currentSpec, p.toSpec)) this.#d.log.info('password of core updated');
    });
  }

  async #applyOs(): Promise<void> {
    const j = this.#d.journal;
    await this.#applyStep('os-done', 'rpm-ostree', async () => {
      const p = j.state.pending!;
      await this.#d.staging?.checkBeforeApply(p.to, p.toSpec);
      const changed = await applyOsChanges(this.#d.rpmOstree, j.state.currentSpec, p.toSpec, { kargs: j.state.undoneKargs, extensions: j.state.undoneExtensions }, { cacheOnly: this.#d.staging?.cacheOnlyFor(p.to) ?? false });
      if (changed.length) this.#d.log.info({ changed }, 'OS changes staged with rpm-ostree');
      if (changed.length) j.update((s) => { s.pending!.osChanged = true; });
    });
  }

  /** Runs one apply step after the files are committed (a failure is undone by the step table). */
  async #applyStep(done: 'units-done' | 'os-done', object: string, work: () => Promise<unknown>): Promise<void> {
    await this.#within('apply', object, work);
    this.#d.journal.update((s) => { s.pending!.step = done; });
    this.#d.failpoints.hit(done);
  }

  async #actionsOrReboot(): Promise<StepOutcome> {
    const j = this.#d.journal;
    const plan = j.state.pending!.plan!;
    if (plan.reboot) {
      j.update((s) => {
        s.pending!.step = 'rebooting';
        s.pending!.rebootFromBootId = this.#bootId();
        s.lastDisruption = `reboot: ${plan.rebootReasons.join('; ')}`;
        if (s.currentUpdate) s.currentUpdate.disruption = s.lastDisruption;
      });
      await this.#reboot();
      return 'wait'; // the process ends with the machine
    }
    this.#report('Working', 'actions');
    const actions = this.#actionsToRun();
    await this.#within('actions', actions.map((a) => (a.unit ? `${a.type} ${a.unit}` : a.type)).join(', ') || 'none', () => runActions(this.#d.systemd, actions));
    j.update((s) => {
      s.pending!.step = 'actions-done';
      s.lastDisruption = actions.length ? actions.map((a) => (a.unit ? `${a.type} ${a.unit}` : a.type)).join(', ') : 'none';
      if (s.currentUpdate) s.currentUpdate.disruption = s.lastDisruption;
    });
    return 'next';
  }

  /** The plan's actions the agent runs: not a drain (the control plane's), not a unit stopped on purpose. */
  #actionsToRun(): DisruptionAction[] {
    const j = this.#d.journal;
    const p = j.state.pending!;
    // A unit the new config masks or drops was stopped on purpose: restarting it would fail.
    const kept = new Set(p.toSpec.config.systemd.units.filter((u) => !u.mask).map((u) => u.name));
    const dropped = new Set((j.state.currentSpec?.config.systemd.units ?? []).map((u) => u.name).filter((n) => !kept.has(n)));
    for (const u of p.toSpec.config.systemd.units) if (u.mask) dropped.add(u.name);
    return (p.plan?.actions ?? []).filter((a) => a.type !== 'drain' && (!a.unit || !dropped.has(a.unit)));
  }

  async #reboot(): Promise<void> {
    this.#report('Working', 'reboot');
    this.#d.failpoints.hit('rebooting');
    this.#d.log.info({ reasons: this.#d.journal.state.pending?.plan?.rebootReasons }, 'rebooting');
    try {
      await this.#d.rebooter.reboot();
    } catch (err) {
      throw new UpdateStepError('reboot', this.#d.config.reboot.method === 'logind' ? 'logind' : 'reboot command', (err as Error).message);
    }
  }

  /**
   * After a corrupt journal: the agent no longer knows what it applied, so it checks the disk
   * (files, units, password, booted deployment) against the desired config. If all match, it
   * adopts the config without touching anything (no reboot); otherwise it applies it in full.
   * Returns true when adopted.
   */
  async #recover(a: Assignment): Promise<boolean> {
    const j = this.#d.journal;
    const note = recoveryNote(j.state.recovered!);
    this.#report('Working', 'check', `${note}; checking the disk against ${a.config}`);
    let mismatches: string[];
    try {
      mismatches = await this.#mismatches(a.spec, null);
    } catch (err) {
      await this.#fail(err);
      return true;
    }
    if (mismatches.length === 0) {
      j.update((s) => {
        s.currentConfig = a.config;
        s.currentSpec = a.spec;
        s.currentPolicy = a.policy;
        s.currentDriftPolicy = a.driftPolicy;
        s.recovered = null;
        s.failure = null;
      });
      this.#note = `${note}; the disk matches ${a.config}, adopted without changes`;
      this.#d.log.warn({ config: a.config }, 'recovered from a corrupt journal: the disk matches the desired config; adopted it without changes');
      this.#report('Done', 'done');
      return true;
    }
    this.#note = `${note}; the disk differed from ${a.config} (${mismatches.length} difference${mismatches.length === 1 ? '' : 's'}), applying it in full`;
    this.#d.log.warn({ config: a.config, mismatches }, 'recovered from a corrupt journal: the disk differs from the desired config; applying it in full');
    j.update((s) => { s.recovered = null; });
    return false;
  }

  /** Every way the disk, systemd and the booted deployment differ from `to`. */
  async #mismatches(to: MachineConfigSpec, from: MachineConfigSpec | null, undone: UndonePath[] = []): Promise<string[]> {
    const mismatches: string[] = [];
    const desired = desiredFiles(to, this.#layout);
    for (const f of desired) {
      if (!matchesOnDisk(f)) mismatches.push(`${f.object}: on disk differs from the config (content, mode or owner)`);
    }
    const managed = new Set(desired.map((f) => f.hostPath));
    for (const u of undone) {
      if (managed.has(u.hostPath)) continue;
      const now = readNoFollow(u.hostPath);
      if (!u.existed && now !== undefined) mismatches.push(`${u.object}: an undone update created it and no config manages it, but it is still there`);
      else if (u.existed && now !== undefined && sha256(now) === u.written) mismatches.push(`${u.object}: an undone update wrote it and no config manages it, but its original was not put back`);
    }
    mismatches.push(...(await this.#within('validate', 'systemd unit states', () => unitMismatches(this.#d.systemd, to))).map(describeUnitMismatch));
    const hash = shadowHashOfCore(this.#layout.root);
    const wanted = passwordHashOf(to) || (passwordHashOf(from) ? LOCKED : undefined);
    if (wanted !== undefined && hash !== undefined && hash !== wanted) mismatches.push('password of core: /etc/shadow does not hold the configured hash');
    mismatches.push(...(await this.#within('validate', 'the booted deployment', () => osMismatches(this.#d.rpmOstree, from, to, this.#d.config.paths.kernelCmdlineFile))));
    return mismatches;
  }

  async #validateAndFinish(): Promise<StepOutcome> {
    const j = this.#d.journal;
    const p = j.state.pending!;
    if (p.step !== 'validating') j.update((s) => { s.pending!.step = 'validating'; });
    this.#report('Working', 'validate');
    const mismatches = await this.#mismatches(p.toSpec, j.state.currentSpec, p.undone);
    if (mismatches.length) throw new UpdateStepError('validate', p.to, mismatches.join('; '));
    if (p.healthCheck) {
      j.update((s) => { s.pending!.step = 'health'; });
      return 'next';
    }
    this.#finishUpdate();
    return 'finished';
  }

  /** The update is applied and healthy: the undo links go and currentConfig advances. */
  #finishUpdate(): void {
    const j = this.#d.journal;
    const p = j.state.pending!;
    this.#files.finish();
    j.update((s) => {
      s.currentConfig = p.to;
      s.currentSpec = p.toSpec;
      s.currentPolicy = p.policy;
      s.currentDriftPolicy = p.driftPolicy;
      s.currentHealthCheck = p.healthCheck ?? null;
      s.pending = null;
      s.failure = null;
      s.undoReboot = null;
      // Its OS step took them out of the pending deployment (and it booted, if it changed the OS).
      s.undoneKargs = null;
      s.undoneExtensions = null;
      if (s.currentUpdate) s.lastUpdate = finishUpdate(s.currentUpdate, 'Done', '', Date.now());
      s.currentUpdate = null;
    });
    this.#d.log.info({ config: p.to }, 'update done');
    this.#report('Done', 'done');
  }

  /** The health gate; when it fails, the way back is the next steps (each journaled, so a crash or the reboot resumes it). */
  async #healthGate(): Promise<StepOutcome> {
    const j = this.#d.journal;
    const p = j.state.pending!;
    this.#report('Working', 'health');
    const cause = await runHealthGate(p.healthCheck!, { activeState: (u) => this.#within('health', `unit ${u}`, () => this.#d.systemd.activeState(u)) });
    if (!cause) {
      this.#d.log.info({ config: p.to }, 'health check passed');
      this.#finishUpdate();
      return 'finished';
    }
    this.#d.log.error({ config: p.to, cause }, 'health check failed; rolling the node back');
    j.update((s) => { s.pending!.step = 'rolling-back'; s.pending!.rollbackCause = cause; });
    this.#d.failpoints.hit('rolling-back');
    return 'next';
  }

  /** The node is back on the previous config after a failed health gate: RolledBack, with why. */
  #recordRolledBack(): void {
    const j = this.#d.journal;
    const p = j.state.pending!;
    const cause = p.rollbackCause ?? 'the health check failed';
    const back = p.from || 'no config';
    const reason = `health: ${cause}; rolled back to ${back}${p.osChanged ? ' (rpm-ostree rollback and a reboot)' : p.plan?.reboot ? ' (with a reboot)' : ''}; \`mcctl node reapply\` retries ${p.to}, a new config replaces it`;
    this.#files.release();
    j.update((s) => {
      s.failure = { state: 'RolledBack', phase: 'health', reason, config: s.pending!.to };
      s.pending = null;
      if (s.currentUpdate) s.lastUpdate = finishUpdate(s.currentUpdate, 'RolledBack', reason, Date.now());
      s.currentUpdate = null;
    });
    this.#d.log.warn({ config: back, failed: j.state.failure!.config }, 'node rolled back');
    this.#report('RolledBack', 'health', reason);
  }

  /** Puts the files, units and password of the previous config back, and rpm-ostree's previous deployment. */
  async #rollBackNode(): Promise<void> {
    const j = this.#d.journal;
    const p = j.state.pending!;
    this.#report('Working', 'rollback', `health: ${p.rollbackCause}; returning to ${p.from || 'no config'}`);
    // The undo links are still there (finish() runs only after the gate): every old inode comes
    // back, with the units' states; the units the update added are disabled first.
    const { errors } = await this.#undoHost();
    this.#d.failpoints.hit('rollback-files');
    if (errors.length) throw new UpdateStepError('rollback', 'the previous config', errors.join('; '));
    if (p.plan?.reboot) {
      j.update((s) => {
        s.pending!.step = 'rollback-rebooting';
        s.pending!.rebootFromBootId = this.#bootId();
        s.lastDisruption = 'reboot: rollback after a failed health check';
      });
      await this.#reboot();
      return;
    }
    // No reboot: the services the update restarted run again on the old files.
    const actions = (p.plan?.actions ?? []).filter((a) => a.type === 'restart' || a.type === 'reload' || a.type === 'daemon-reload');
    await this.#within('rollback', 'restarting services on the old files', () => runActions(this.#d.systemd, actions)).catch((err: unknown) => {
      this.#d.log.error({ err: (err as Error).message }, 'a service did not restart on the old files');
    });
  }

  /**
   * \`rpm-ostree rollback\` makes the previous deployment the default for the next boot. Run it
   * once only: it toggles, so after a crash the boot order tells whether it already ran (the
   * booted deployment is first until it has).
   */
  async #rpmOstreeRollback(): Promise<void> {
    const status = JSON.parse(await this.#d.rpmOstree.run(['status', '--json'])) as { deployments?: { booted?: boolean; staged?: boolean }[] };
    const first = status.deployments?.[0];
    if (!first || (!first.booted && !first.staged)) return;
    await this.#d.rpmOstree.run(['rollback']);
    this.#d.log.warn('rpm-ostree rollback: the previous deployment boots next');
  }

  /**
   * Takes the host from the pending update back to the current config, whatever step it
   * reached: the units it added (disabled and stopped while their files exist), its files (undo
   * links renamed back; the originals it took over restored and their backups forgotten, the
   * ones it put back listed again), the enablement and masks of the current config's units (a
   * unit it retired is enabled again), the password of core, and rpm-ostree: a staged deployment
   * is dropped; one already booted is rolled back, and the result says a reboot must follow.
   * Each part is tried even when one before it failed; what failed is logged, and the
   * validation of the next update (or the drift monitor) reports what is still wrong.
   */
  async #undoHost(): Promise<{ reboot: boolean; errors: string[] }> {
    const j = this.#d.journal;
    const p = j.state.pending!;
    const previous = j.state.currentSpec;
    const errors: string[] = [];
    const attempt = async (what: string, work: () => Promise<unknown>): Promise<void> => {
      try {
        await this.#within('rollback', what, work);
      } catch (err) {
        errors.push(`${what}: ${(err as Error).message}`);
      }
    };
    const created = new Set((p.fileOps ?? []).filter((op) => op.action === 'write' && !op.undo && dirname(op.hostPath) === this.#layout.unitDir).map((op) => basename(op.hostPath)));
    await attempt('units the update added', () => undoAddedUnits(this.#d.systemd, previous, p.toSpec, created, p.unitsBefore ?? {}));
    if (p.step === 'staging') this.#files.abandonStaged();
    else if (p.step !== 'check') {
      // Half-committed: roll forward first, so every op and backup is on record, then back.
      if (p.step === 'committing') this.#files.commit();
      this.#files.cleanupErrors = [];
      this.#files.rollBack();
      errors.push(...this.#files.cleanupErrors);
    }
    await attempt('systemd daemon-reload', () => this.#d.systemd.reload());
    if (previous) {
      await attempt('units of the current config', () => applyUnitStates(this.#d.systemd, p.toSpec, previous, false));
      await attempt('password of core', () => applyPasswordHash(this.#layout.root, p.toSpec, previous));
    } else {
      // A first config: nothing was there before it; its retired units are already disabled.
    }
    const booted = p.rebootFromBootId !== undefined && this.#bootId() !== p.rebootFromBootId;
    let reboot = false;
    // Remembered before rpm-ostree is touched (a kill may come next): should its deployment stay
    // pending, or be the one left to boot next, its kernel arguments and extensions are taken out
    // again (below, and by the next update's applyOsChanges).
    const kargs = splitKernelArguments(p.toSpec.kernelArguments);
    const extensions = p.toSpec.extensions ?? [];
    if (kargs.some((k) => !j.state.undoneKargs?.includes(k)) || extensions.some((e) => !j.state.undoneExtensions?.includes(e))) {
      j.update((s) => {
        s.undoneKargs = [...new Set([...(s.undoneKargs ?? []), ...kargs])];
        s.undoneExtensions = [...new Set([...(s.undoneExtensions ?? []), ...extensions])];
      });
    }
    if (p.osChanged && booted) {
      await attempt('rpm-ostree rollback', () => this.#rpmOstreeRollback());
      reboot = true;
    } else if (p.osChanged || p.step === 'units-done') {
      // Drops the deployment the update staged (at units-done a kill may have come between
      // rpm-ostree's change and the journal's record of it): every later rpm-ostree change builds
      // on the pending deployment, so a staged one left here would carry the undone update's
      // changes into the next. An update that staged nothing leaves the pending deployment alone:
      // it may be the one an earlier undo rolled back to. A failure is reported, not swallowed.
      await attempt('rpm-ostree cleanup -p', () => this.#d.rpmOstree.run(['cleanup', '-p']));
    }
    if (p.osChanged || p.step === 'units-done') {
      // The deployment that boots next must hold the current config's OS. Dropping the staged one
      // or rolling back goes to the deployment before it, which is not always the current
      // config's: after an earlier undo's rollback, the update was built on the deployment rolled
      // back to (not booted), which rpm-ostree may have pruned, so a cleanup or a second rollback
      // leaves the first undone update's deployment to boot next (its kernel type, extensions
      // and image with it). What it holds that the current config does not is changed back there.
      await attempt('rpm-ostree: the current config\'s OS in the next boot\'s deployment', async () => {
        const changed = await applyOsChanges(this.#d.rpmOstree, p.toSpec, previous ?? { ...p.toSpec, kernelArguments: [], kernelType: 'default', extensions: [], osImageURL: '' }, { kargs: j.state.undoneKargs, extensions: j.state.undoneExtensions });
        if (changed.length === 0) return;
        this.#d.log.warn({ changed }, 'the deployment that boots next did not hold the current config\'s OS; staged it again');
        reboot = true;
      });
    }
    if (errors.length) this.#d.log.error({ errors }, 'some of the update could not be undone');
    return { reboot, errors };
  }

  /**
   * Undoes the pending update, which did not finish, because \`by\` replaces it. Journaled first
   * (pending.undoing), so a kill in the middle finishes the undo on restart rather than resuming
   * the update. Returns the paths it wrote, for the next update's validation.
   */
  async #undoUnfinished(by: string): Promise<UndonePath[]> {
    const j = this.#d.journal;
    const p = j.state.pending!;
    this.#d.log.warn({ config: p.to, step: p.step, by }, 'undoing an update that did not finish: a new config replaces it');
    if (!p.undoing) j.update((s) => { s.pending!.undoing = true; });
    let written = new Map<string, DesiredFile>();
    try {
      written = new Map(desiredFiles(p.toSpec, this.#layout).map((f) => [f.hostPath, f]));
    } catch {
      // Its paths no longer resolve: nothing of it to check afterwards.
    }
    const undone: UndonePath[] = (p.fileOps ?? []).flatMap((op) => {
      const f = written.get(op.hostPath);
      return op.action === 'write' && f ? [{ hostPath: op.hostPath, object: f.object, existed: op.undo !== undefined, written: sha256(f.bytes) }] : [];
    });
    const { reboot } = await this.#undoHost();
    this.#files.release();
    j.update((s) => {
      if (reboot) s.undoReboot = `undoing the unfinished update to ${p.to} (its rpm-ostree deployment was booted)`;
      if (s.currentUpdate) s.lastUpdate = finishUpdate(s.currentUpdate, 'Superseded', `superseded by an update to ${by} before it finished; undone`, Date.now());
      s.currentUpdate = null;
      s.pending = null;
    });
    return undone;
  }

  async #fail(err: unknown): Promise<void> {
    const e = err instanceof UpdateStepError ? err : new UpdateStepError(this.progress.phase, 'agent', (err as Error).message);
    // Every UpdateStepError the agent throws names the phase it ran in (#within, wrap).
    const phase = e.step as UpdatePhase;
    const state: NodeState = err instanceof UnreconcilableError ? 'Unreconcilable' : 'Degraded';
    this.#d.log.error({ step: e.step, object: e.object, cause: e.cause_, state }, 'update failed');
    const j = this.#d.journal;
    // The step table says whether a failure here is undone now or the update is kept.
    const undo = j.state.pending ? stepNamed(j.state.pending.step).undo : null;
    if (undo) {
      this.#d.log.warn({ step: j.state.pending!.step }, 'putting the host back on the current config');
      await undo(this.#runner);
    }
    j.update((s) => {
      s.failure = { state, phase, reason: e.message, ...(s.pending ? { config: s.pending.to } : {}) };
      if (s.currentUpdate) s.lastUpdate = finishUpdate(s.currentUpdate, state, e.message, Date.now());
      s.currentUpdate = null;
      // A kept step (a reboot still to happen, a validation still to pass, the health gate or its
      // rollback) resumes; at every other step the host has just been put back, and resuming
      // would replay the commit over the restored files.
      if (s.pending && !keptAfterFailure(s.pending.step)) s.pending = null;
    });
    this.#report(state, phase, e.message);
  }

  #bootId(): string {
    try {
      return readFileSync(this.#d.config.paths.bootIdFile, 'utf8').trim();
    } catch {
      return '';
    }
  }
}

function recoveryNote(r: { movedTo: string; cause: string }): string {
  return `recovered from a corrupt journal (${r.cause}), moved aside to ${r.movedTo}`;
}

/** sshd ignores keys in a directory others can write: authorized_keys.d is 0700, owned by core. */
/** Changed on the opened directory: core owns the home and could swap in a symlink by then. */
function secureSshDirectory(desired: DesiredFile[]): void {
  const keys = desired.find((f) => f.object === SSH_KEYS_OBJECT);
  if (!keys) return;
  const dir = openDirNoFollow(dirname(keys.hostPath));
  try {
    fchmodSync(dir.fd, 0o700);
    if (keys.uid !== undefined) fchownSync(dir.fd, keys.uid, keys.gid ?? keys.uid);
  } finally {
    dir.close();
  }
}

function objectOf(err: unknown, desired: { hostPath: string; object: string }[]): string {
  const path = (err as NodeJS.ErrnoException).path;
  return desired.find((f) => path && (path === f.hostPath || path.includes(f.hostPath.split('/').pop()!)))?.object ?? 'files';
}

/** The bytes at a path without following a symlink there; undefined when absent or not a file. */
function readNoFollow(hostPath: string): Buffer | undefined {
  try {
    return inParentOf(hostPath, (dir, name) => (dir.lstat(name)?.isFile() ? dir.readFile(name) : undefined)) ?? undefined;
  } catch {
    return undefined;
  }
}
