// One node update, as MCO's daemon does it, with every step reported as a phase:
//
//   check     the change is reconcilable and every path resolves on this host
//   diff      what changes, by category
//   plan      what that costs: actions, or a reboot (the pool's disruption policy)
//   apply     files, units and keys in one transaction; then units; then rpm-ostree
//   reboot    only if the plan says so, through logind, after the journal records it
//   validate  the disk, systemd and the booted deployment match the config
//   health    the pool's health gate (spec.healthCheck): units active, a command succeeds
//   try       the pool's try (spec.rollout.confirm): checks pass or an operator confirms before
//             the journaled deadline, else the node reverts by itself (update-undo.ts)
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
import { basename, dirname, join } from 'node:path';
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
  describeHookAction,
  hookApplies,
  hookChangedPaths,
  type HookPoint,
  DEFAULT_HOOK_TIMEOUT,
  type LifecycleHooks,
  type TryPolicy,
  tryTimeoutMs,
  type MachineConfigSpec,
  type NodeState,
  type UpdateRecord,
} from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import { desiredFiles, layoutOf, managedPaths, sha256, SSH_KEYS_OBJECT, type HostLayout } from './desired-files.ts';
import { inParentOf, openDirNoFollow } from './no-follow-fs.ts';
import { FileTransaction, matchesOnDisk, type Advance, type DesiredFile } from './file-transaction.ts';
import { stepAdvance } from './step-advance.ts';
import { UpdateUndo } from './update-undo.ts';
import type { Failpoints } from './failpoints.ts';
import type { AgentConfig } from './agent-config.ts';
import type { Journal, UndonePath } from './journal.ts';
import { applyOsChanges, osMismatches } from './os-operations.ts';
import { applyPasswordHash, LOCKED, passwordHashOf, shadowHashOfCore } from './password.ts';
import type { Rebooter } from './reboot.ts';
import type { RpmOstree } from './rpm-ostree.ts';
import type { SystemdClient } from './systemd-client.ts';
import { applyUnitStates, describeUnitMismatch, retireRemovedUnits, runActions, undoAddedUnits, unitMismatches, unitStatesToRemember } from './unit-operations.ts';
import { runHealthGate } from './health-gate.ts';
import { tryProblem } from './try-checks.ts';
import { runHookAction } from './hook-runner.ts';
import { FIRST_STEP, keptAfterFailure, stepNamed, type Failpoint, type StepOutcome, type StepRunner, type UpdatePhase } from './update-steps.ts';

export interface Assignment {
  config: string;
  spec: MachineConfigSpec;
  policy: DisruptionPolicy | null;
  driftPolicy: DriftPolicy;
  /** The pool's health gate (spec.healthCheck); null for none. */
  healthCheck?: HealthCheck | null;
  /** Try mode (the pool's spec.rollout.confirm); null for none. */
  try?: TryPolicy | null;
  /** Lifecycle hooks (the pool's spec.hooks, then its configs' mcplane.io/hooks); null for none. */
  hooks?: LifecycleHooks | null;
}

export interface Progress {
  state: NodeState;
  /** One of the phases the step table reports (a failure names the phase it happened in). */
  phase: UpdatePhase;
  reason: string;
  desiredConfig: string;
}

/**
 * What the engine tells the agent on every phase or state change, whole: the node's progress and
 * the journal's record of what is applied, so the agent sends it on without reading the journal.
 */
export interface EngineStatus extends Progress {
  currentConfig: string;
  lastDisruption: string;
  currentUpdate: UpdateRecord | null;
  lastUpdate: UpdateRecord | null;
}

export interface EngineDeps {
  config: AgentConfig;
  journal: Journal;
  systemd: SystemdClient;
  rpmOstree: RpmOstree;
  rebooter: Rebooter;
  failpoints: Failpoints;
  log: Logger;
  /** Pushed on every phase or state change. */
  onStatus: (status: EngineStatus) => void;
  /** Whether the agent's stream to the control plane is registered now (a try's controlPlane check). */
  controlPlaneConnected?: () => boolean;
  /** Staging before the drain (os-staging.ts): the disk check before the OS apply, and whether it may go --cache-only. */
  staging?: { cacheOnlyFor(config: string): boolean; checkBeforeApply(config: string, spec: MachineConfigSpec): Promise<void> };
}

export class UpdateEngine {
  readonly #d: EngineDeps;
  readonly #layout: HostLayout;
  readonly #files: FileTransaction;
  readonly #undo: UpdateUndo;
  /** Moves the pending update on by the step table's transition for an event (step-advance.ts). */
  readonly #advance: Advance;
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
    const advance = stepAdvance(deps.journal, deps.failpoints);
    this.#advance = advance;
    this.#files = new FileTransaction(deps.journal, deps.failpoints, advance);
    this.#undo = new UpdateUndo({
      journal: deps.journal, files: this.#files, layout: this.#layout, systemd: deps.systemd, rpmOstree: deps.rpmOstree,
      failpoints: deps.failpoints, log: deps.log, advance,
      within: (phase, object, work) => this.#within(phase, object, work),
      report: (state, phase, reason) => this.#report(state, phase, reason),
      reboot: () => this.#reboot(),
      bootId: () => this.#bootId(),
    });
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

  /** The status as of now (the same snapshot onStatus pushes). */
  status(): EngineStatus {
    const s = this.#d.journal.state;
    return {
      ...this.progress,
      currentConfig: s.currentConfig,
      lastDisruption: s.lastDisruption,
      currentUpdate: s.currentUpdate ?? null,
      lastUpdate: s.lastUpdate ?? null,
    };
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
    if (!force && !s.pending && (s.failure?.state === 'RolledBack' || s.failure?.state === 'TryReverted') && s.failure.config === assignment.config) return;
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

  /**
   * Ends a failure drift put on the node (outside an update), reporting Done; false when the
   * node is not failed for drift or an update runs. The caller watches again: drift that is
   * still there (on paths still watched) fails the node again at once.
   */
  clearDriftFailure(): boolean {
    const s = this.#d.journal.state;
    if (s.pending || this.#running || s.failure?.phase !== 'drift') return false;
    this.#d.journal.update((st) => { st.failure = null; });
    this.#report('Done', 'done', '');
    return true;
  }

  #report(state: NodeState, phase: UpdatePhase, reason = this.#note): void {
    this.#recordPhase(state, phase);
    const s = this.#d.journal.state;
    this.progress = { state, phase, reason, desiredConfig: s.pending?.to ?? s.failure?.config ?? s.currentConfig };
    this.#d.onStatus(this.status());
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
      try {
        const { adopted, note } = await this.#undo.recover(a, recoveryNote(j.state.recovered), (spec) => this.#mismatches(spec, null));
        this.#note = note;
        if (adopted) {
          this.#report('Done', 'done');
          return;
        }
      } catch (err) {
        await this.#fail(err);
        return;
      }
    } else {
      this.#note = '';
    }
    // An update that did not finish (its reboot failed, its validation failed) is undone before
    // the new one is planned from the current config: finishing it instead would keep its files,
    // units and keys, forget the originals it took over and plan from a config the disk is not on.
    const undone = j.state.pending ? await this.#undo.undoUnfinished(a.config) : [];
    j.update((s) => {
      const now = Date.now();
      // An update still open here was overtaken before it finished (waiting for its reboot).
      if (s.currentUpdate) s.lastUpdate = finishUpdate(s.currentUpdate, 'Superseded', `superseded by an update to ${a.config} before it finished`, now);
      const id = randomBytes(4).toString('hex');
      s.pending = {
        id, from: s.currentConfig, to: a.config, toSpec: a.spec,
        policy: a.policy, driftPolicy: a.driftPolicy, healthCheck: a.healthCheck ?? null, try: a.try ?? null, hooks: a.hooks ?? null, step: FIRST_STEP, force,
        ...(this.#note ? { note: this.#note } : {}),
        ...(undone.length ? { undone } : {}),
      };
      s.currentUpdate = startUpdate(`${id}-${randomBytes(2).toString('hex')}`, s.currentConfig, a.config, now);
    });
    this.#d.log.info({ from: j.state.currentConfig || undefined, to: a.config, force }, 'update started');
    // The first step is journaled here, not advanced to: its failpoint fires here as step-advance.ts fires the others'.
    if (stepNamed(FIRST_STEP).failpoint) this.#d.failpoints.hit(FIRST_STEP as Failpoint);
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
        await this.#undo.undoUnfinished(j.state.pending!.to);
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
    beforeUpdating: async () => {
      await this.#runHooks('beforeUpdating');
      this.#advance('hooked');
      return 'next';
    },
    afterUpdating: async () => {
      await this.#runHooks('afterUpdating');
      this.#advance(this.#d.journal.state.pending!.plan!.reboot ? 'reboot' : 'applied');
      return 'next';
    },
    beforeRebooting: async () => {
      await this.#runHooks('beforeRebooting');
      const plan = this.#d.journal.state.pending!.plan!;
      const bootId = this.#bootId();
      this.#advance('reboot', (s) => {
        s.pending!.rebootFromBootId = bootId;
        s.lastDisruption = `reboot: ${plan.rebootReasons.join('; ')}`;
        if (s.currentUpdate) s.currentUpdate.disruption = s.lastDisruption;
      });
      await this.#reboot();
      return 'wait'; // the process ends with the machine
    },
    afterRebooting: async () => {
      await this.#runHooks('afterRebooting');
      return this.#gateTryOrFinish();
    },
    nothingToUndo: async () => undefined,
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
      this.#advance('booted', (s) => { if (s.currentUpdate) endPhase(s.currentUpdate, Date.now()); });
      return 'next';
    },
    validate: () => this.#validateAndFinish(),
    healthGate: () => this.#healthGate(),
    tryChecks: () => this.#tryChecks(),
    rollBackNode: async () => {
      if (await this.#undo.rollBackNode() === 'wait') return 'wait'; // the process ends with the machine
      this.#undo.recordRolledBack();
      return 'finished';
    },
    rollbackRebootOrFinish: async () => {
      if (this.#bootId() === this.#d.journal.state.pending!.rebootFromBootId) {
        await this.#reboot(); // the reboot has not happened yet
        return 'wait';
      }
      this.#undo.recordRolledBack();
      return 'finished';
    },
    undoHost: () => this.#undo.undoHost(),
    undoActions: async () => {
      await this.#undo.undoHost();
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
    await this.#applyStep('systemd units and the password of core', async () => {
      await applyUnitStates(this.#d.systemd, j.state.currentSpec, p.toSpec, unitFilesChanged);
      if (await applyPasswordHash(this.#layout.root, j.state.currentSpec, p.toSpec)) this.#d.log.info('password of core updated');
    });
  }

  async #applyOs(): Promise<void> {
    const j = this.#d.journal;
    await this.#applyStep('rpm-ostree', async () => {
      const p = j.state.pending!;
      await this.#d.staging?.checkBeforeApply(p.to, p.toSpec);
      const changed = await applyOsChanges(this.#d.rpmOstree, j.state.currentSpec, p.toSpec, { kargs: j.state.undoneKargs, extensions: j.state.undoneExtensions }, { cacheOnly: this.#d.staging?.cacheOnlyFor(p.to) ?? false });
      if (changed.length) this.#d.log.info({ changed }, 'OS changes staged with rpm-ostree');
      if (changed.length) j.update((s) => { s.pending!.osChanged = true; });
    });
  }

  /** Runs one apply step after the files are committed (a failure is undone by the step table). */
  async #applyStep(object: string, work: () => Promise<unknown>): Promise<void> {
    await this.#within('apply', object, work);
    this.#advance('applied');
  }

  async #actionsOrReboot(): Promise<StepOutcome> {
    const j = this.#d.journal;
    const plan = j.state.pending!.plan!;
    // The reboot is asked for after the afterUpdating and beforeRebooting hooks (their steps).
    if (plan.reboot) {
      this.#advance('reboot');
      return 'next';
    }
    this.#report('Working', 'actions');
    const actions = this.#actionsToRun();
    await this.#within('actions', actions.map((a) => (a.unit ? `${a.type} ${a.unit}` : a.type)).join(', ') || 'none', () => runActions(this.#d.systemd, actions));
    this.#advance('applied', (s) => {
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
    this.#d.log.info({ reasons: this.#d.journal.state.pending?.plan?.rebootReasons }, 'rebooting');
    try {
      await this.#d.rebooter.reboot();
    } catch (err) {
      throw new UpdateStepError('reboot', this.#d.config.reboot.method === 'logind' ? 'logind' : 'reboot command', (err as Error).message);
    }
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
    if (p.step === 'actions-done') this.#advance('validate');
    this.#report('Working', 'validate');
    const mismatches = await this.#mismatches(p.toSpec, j.state.currentSpec, p.undone);
    if (mismatches.length) throw new UpdateStepError('validate', p.to, mismatches.join('; '));
    // Booted into the update: the afterRebooting hooks come before the health gate.
    if (p.rebootFromBootId !== undefined) {
      this.#advance('booted');
      return 'next';
    }
    return this.#gateTryOrFinish();
  }

  /** The health gate comes next when the pool has one, else the try or the end. */
  #gateTryOrFinish(): StepOutcome {
    if (this.#d.journal.state.pending!.healthCheck) {
      this.#advance('gate');
      return 'next';
    }
    return this.#tryOrFinish();
  }

  /**
   * Runs a hook point's actions in order, each a transient systemd unit (hook-runner.ts). An
   * action whose `if` matches no path the update changes is skipped; each result goes into the
   * update's record (the node's history), and each that passed into the journal, so a restart
   * does not run it again. The first that fails ends the step: the step table says what follows.
   */
  async #runHooks(point: HookPoint): Promise<void> {
    const j = this.#d.journal;
    const p = j.state.pending!;
    const actions = p.hooks?.[point] ?? [];
    if (actions.length === 0) return;
    const changed = hookChangedPaths(diffSpecs(j.state.currentSpec ?? undefined, p.toSpec));
    for (const [index, action] of actions.entries()) {
      const key = `${point}[${index}]`;
      if (j.state.pending!.hooksPassed?.includes(key)) continue;
      const name = describeHookAction(point, index, action);
      if (!hookApplies(action, changed)) {
        j.update((s) => {
          s.pending!.hooksPassed = [...(s.pending!.hooksPassed ?? []), key];
          if (s.currentUpdate) s.currentUpdate.hooks = [...(s.currentUpdate.hooks ?? []), { point, index, argv: action.run, exitStatus: -1, durationMs: 0, result: 'skipped' }];
        });
        this.#d.log.info({ hook: name, if: action.if }, 'hook skipped: the update changes none of its paths');
        continue;
      }
      this.#report('Working', 'hooks', `running hook ${name}`);
      const run = await runHookAction({
        systemd: this.#d.systemd, node: this.#d.config.nodeName, outputDir: join(this.#d.config.paths.stateDir, 'hooks'),
        env: { MCPLANE_HOOK: point, MCPLANE_FROM_CONFIG: p.from, MCPLANE_TO_CONFIG: p.to },
      }, point, index, action);
      const passed = run.result.result === 'success';
      j.update((s) => {
        if (passed) s.pending!.hooksPassed = [...(s.pending!.hooksPassed ?? []), key];
        if (s.currentUpdate) s.currentUpdate.hooks = [...(s.currentUpdate.hooks ?? []), run.result];
      });
      this.#d.log[passed ? 'info' : 'error']({ hook: name, unit: run.unit, exitStatus: run.result.exitStatus, result: run.result.result, ms: run.result.durationMs, output: run.tail }, passed ? 'hook passed' : 'hook failed');
      if (passed) {
        this.#d.failpoints.hit('hook-passed', j.state.pending!.hooksPassed!.length - 1);
        continue;
      }
      const how = run.result.result === 'timeout'
        ? `killed at its timeout of ${action.timeout ?? DEFAULT_HOOK_TIMEOUT} (unit ${run.unit})`
        : run.result.exitStatus >= 0 ? `exited ${run.result.exitStatus}` : `failed (unit ${run.unit})`;
      throw new UpdateStepError('hooks', name, `${how}${run.tail ? `: ${run.tail}` : ''}`);
    }
  }

  /** A try comes next when the update has one; else the update is done. */
  #tryOrFinish(): StepOutcome {
    const p = this.#d.journal.state.pending!;
    if (p.try) {
      const deadline = Date.now() + tryTimeoutMs(p.try);
      this.#advance('try', (s) => { s.pending!.tryDeadline = deadline; });
      return 'next';
    }
    this.#finishUpdate();
    return 'finished';
  }

  /**
   * A try: its checks run until they all pass or the node is confirmed by hand (mcctl confirm),
   * and the node reverts by itself once the journaled deadline passes without either; with no
   * control plane needed, since the change may have cut the host off from it. Past the deadline
   * at start (the agent or the host was down) it reverts without checking again: the try was
   * not confirmed in its time. A new config ends it too, unconfirmed: its update undoes the try
   * before it starts (an operator's fix must not wait for a long try's timeout).
   */
  async #tryChecks(): Promise<StepOutcome> {
    const j = this.#d.journal;
    const p = j.state.pending!;
    const policy = p.try!;
    const deadline = p.tryDeadline ?? Date.now() + tryTimeoutMs(policy);
    const until = new Date(deadline).toISOString();
    let said = '';
    for (;;) {
      const by = j.state.pending!.tryConfirmedBy;
      if (by) {
        this.#d.log.info({ config: p.to, by }, 'try confirmed by hand');
        this.#finishUpdate();
        return 'finished';
      }
      const left = deadline - Date.now();
      if (left <= 0) break;
      // Another config came: the try is over unconfirmed, and that update undoes it first.
      if (this.#next && this.#next.assignment.config !== p.to) {
        this.#d.log.warn({ config: p.to, by: this.#next.assignment.config }, 'a new config replaces the try before it was confirmed; it is undone first');
        return 'wait';
      }
      const problem = policy.checks.length === 0
        ? 'no checks: waiting to be confirmed (mcctl confirm)'
        : await tryProblem(policy.checks, {
          activeState: (u) => this.#within('try', `unit ${u}`, () => this.#d.systemd.activeState(u)),
          controlPlaneConnected: () => this.#d.controlPlaneConnected?.() ?? false,
        }, left);
      if (!problem) {
        this.#d.log.info({ config: p.to }, 'try confirmed: its checks passed');
        this.#finishUpdate();
        return 'finished';
      }
      if (problem !== said) {
        said = problem;
        j.update((s) => { s.pending!.tryProblem = problem; });
        this.#report('Working', 'try', `trying ${p.to}: ${problem}; reverts at ${until} unless its checks pass or \`mcctl confirm node\` confirms it`);
      }
      if (j.state.pending!.tryConfirmedBy) continue;
      await new Promise((r) => setTimeout(r, Math.min(TRY_POLL_MS, Math.max(0, deadline - Date.now()))));
    }
    const cause = `${j.state.pending!.tryProblem ?? 'not confirmed'} (not confirmed within ${policy.timeout}, the try's timeout)`;
    this.#d.log.error({ config: p.to, cause }, 'try not confirmed; reverting the node');
    this.#advance('failed', (s) => { s.pending!.rollbackCause = cause; s.pending!.rollbackFor = 'try'; });
    return 'next';
  }

  /**
   * An operator's confirmation of the try of `config` (mcctl confirm): journaled, so a try it
   * reaches before its checks pass ends confirmed even across a restart. False when the node is
   * not updating to that config.
   */
  confirmTry(config: string, by: string): boolean {
    const j = this.#d.journal;
    const p = j.state.pending;
    if (!p || p.to !== config || !p.try || p.undoing || p.rollbackCause) return false;
    if (!p.tryConfirmedBy) j.update((s) => { s.pending!.tryConfirmedBy = by; });
    return true;
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
      return this.#tryOrFinish();
    }
    this.#d.log.error({ config: p.to, cause }, 'health check failed; rolling the node back');
    this.#advance('failed', (s) => { s.pending!.rollbackCause = cause; s.pending!.rollbackFor = 'health'; });
    return 'next';
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

/** How often a try runs its checks again (and looks for a confirmation). */
const TRY_POLL_MS = 1000;

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
