// One node update as a table of steps. Each entry is a step the journal records before it is
// taken (so a restart resumes there), the phases the node reports while it runs, how it runs,
// and what a failure there means: undone (the host goes back to the current config) or kept
// (resumed on restart or by the same config again, undone when another config replaces it).
// The journal's step, the node's phase, the failpoints and the metrics' phase labels are all
// derived from this table: adding a step is one entry here (and its work in the runner).

/** The engine's work, as the steps call it. Each returns what comes next. */
export interface StepRunner {
  /** The beforeUpdating hooks, before anything on the host changes. */
  beforeUpdating(): Promise<StepOutcome>;
  /** The afterUpdating hooks: the update is on disk (and its actions ran when it does not reboot). */
  afterUpdating(): Promise<StepOutcome>;
  /** The beforeRebooting hooks, then the reboot is asked for. */
  beforeRebooting(): Promise<StepOutcome>;
  /** The afterRebooting hooks: booted and validated, before the health gate and the try. */
  afterRebooting(): Promise<StepOutcome>;
  /** A failure before anything changed: nothing to put back. */
  nothingToUndo(): Promise<unknown>;
  /** check, diff, plan; units the new config drops retired; files staged and committed. */
  checkAndApplyFiles(): Promise<StepOutcome>;
  /** A crash while staging: the temps go, the files on disk are all old; planning starts again. */
  abandonStaged(): Promise<StepOutcome>;
  /** A crash while committing: the remaining renames are done (all new). */
  commitFiles(): Promise<StepOutcome>;
  applyUnits(): Promise<StepOutcome>;
  applyOs(): Promise<StepOutcome>;
  actionsOrReboot(): Promise<StepOutcome>;
  /** Asks for the reboot again, or notes that it happened (the boot id changed). */
  rebootOrContinue(): Promise<StepOutcome>;
  validate(): Promise<StepOutcome>;
  healthGate(): Promise<StepOutcome>;
  /** A try's checks until they pass, the node is confirmed, or the journaled deadline passes. */
  tryChecks(): Promise<StepOutcome>;
  rollBackNode(): Promise<StepOutcome>;
  rollbackRebootOrFinish(): Promise<StepOutcome>;
  /** Puts the host back to the current config (files, units, password, staged deployment). */
  undoHost(): Promise<unknown>;
  /** undoHost, then the services the actions restarted run again on the old files. */
  undoActions(): Promise<unknown>;
}

/**
 * next: the journal now names the next step; wait: the process ends with the machine (a reboot
 * was asked for); finished: the update is over (Done or RolledBack, recorded).
 */
export type StepOutcome = 'next' | 'wait' | 'finished';

/**
 * What happened in a step, as its transition names it: the table's `next` maps it to the step
 * the journal records next (the runner never names a step itself).
 */
export type StepEvent = 'hooked' | 'planned' | 'staged' | 'abandoned' | 'committed' | 'applied' | 'reboot' | 'booted' | 'validate' | 'gate' | 'try' | 'failed';

interface StepDef {
  readonly name: string;
  /** The phases the node reports while this step runs (its status). */
  readonly reports: readonly string[];
  readonly run: (r: StepRunner) => Promise<StepOutcome>;
  /** Where the update goes from here, by what happened; an update that ends here has no entry. */
  readonly next: Partial<Record<StepEvent, string>>;
  /** After a failure at this step: how the host goes back, or null to keep the update (see `kept`). */
  readonly undo: ((r: StepRunner) => Promise<unknown>) | null;
  /** The agent kills itself here under MCPLANE_FAILPOINT=<name>, once the step is journaled. */
  readonly failpoint: boolean;
}

export const UPDATE_STEPS = [
  // Lifecycle hooks (spec.hooks): each point is a step, journaled, with a failpoint; an action
  // that passed is journaled too (hooksPassed), so a restart does not run it again. A failing
  // before* hook stops the update with the host as it was; a failing after* hook keeps it
  // (Degraded, resumed or undone as a failed validation is) and the pool's onFailure follows.
  { name: 'before-updating', reports: ['hooks'], run: (r) => r.beforeUpdating(), next: { hooked: 'check' }, undo: (r) => r.nothingToUndo(), failpoint: true },
  { name: 'check', reports: ['check', 'diff', 'plan', 'apply'], run: (r) => r.checkAndApplyFiles(), next: { planned: 'staging' }, undo: (r) => r.undoHost(), failpoint: false },
  { name: 'staging', reports: ['apply'], run: (r) => r.abandonStaged(), next: { staged: 'committing', abandoned: 'check' }, undo: (r) => r.undoHost(), failpoint: true },
  { name: 'committing', reports: ['apply'], run: (r) => r.commitFiles(), next: { committed: 'files-done' }, undo: (r) => r.undoHost(), failpoint: true },
  { name: 'files-done', reports: ['apply'], run: (r) => r.applyUnits(), next: { applied: 'units-done' }, undo: (r) => r.undoHost(), failpoint: false },
  { name: 'units-done', reports: ['apply'], run: (r) => r.applyOs(), next: { applied: 'os-done' }, undo: (r) => r.undoHost(), failpoint: true },
  { name: 'os-done', reports: ['actions', 'reboot'], run: (r) => r.actionsOrReboot(), next: { reboot: 'after-updating', applied: 'after-updating' }, undo: (r) => r.undoActions(), failpoint: true },
  { name: 'after-updating', reports: ['hooks'], run: (r) => r.afterUpdating(), next: { reboot: 'before-rebooting', applied: 'actions-done' }, undo: null, failpoint: true },
  // The files are written: a failing beforeRebooting hook puts them back as a failure at os-done does.
  { name: 'before-rebooting', reports: ['hooks', 'reboot'], run: (r) => r.beforeRebooting(), next: { reboot: 'rebooting' }, undo: (r) => r.undoHost(), failpoint: true },
  // A reboot that failed is kept: the same config asks again, another one undoes it.
  { name: 'rebooting', reports: ['reboot'], run: (r) => r.rebootOrContinue(), next: { booted: 'validating' }, undo: null, failpoint: true },
  { name: 'actions-done', reports: ['validate'], run: (r) => r.validate(), next: { validate: 'validating' }, undo: null, failpoint: false },
  // A validation that failed is kept: a forced re-apply or another config comes next.
  { name: 'validating', reports: ['validate'], run: (r) => r.validate(), next: { gate: 'health', try: 'trying', booted: 'after-rebooting' }, undo: null, failpoint: false },
  { name: 'after-rebooting', reports: ['hooks'], run: (r) => r.afterRebooting(), next: { gate: 'health', try: 'trying' }, undo: null, failpoint: true },
  // The health gate, and the way back when it fails: each resumes after a crash or the reboot.
  { name: 'health', reports: ['health'], run: (r) => r.healthGate(), next: { failed: 'rolling-back', try: 'trying' }, undo: null, failpoint: false },
  // A try (spec.rollout.confirm): its deadline is journaled on the way in, so a restart or a
  // reboot goes on waiting for the same instant; past it, the way back is the rollback's steps.
  { name: 'trying', reports: ['try'], run: (r) => r.tryChecks(), next: { failed: 'rolling-back' }, undo: null, failpoint: true },
  { name: 'rolling-back', reports: ['rollback'], run: (r) => r.rollBackNode(), next: { reboot: 'rollback-rebooting' }, undo: null, failpoint: true },
  { name: 'rollback-rebooting', reports: ['reboot'], run: (r) => r.rollbackRebootOrFinish(), next: {}, undo: null, failpoint: false },
] as const satisfies readonly StepDef[];

/** Where an update is, as the journal records it. */
export type UpdateStep = (typeof UPDATE_STEPS)[number]['name'];

// Every transition names a step of the table (a misspelt one does not compile).
type TargetsOf<T> = T extends unknown ? T[keyof T] : never;
const transitionsNameSteps: TargetsOf<(typeof UPDATE_STEPS)[number]['next']> extends UpdateStep ? true : never = true;
void transitionsNameSteps;

/** What the node reports while it updates, plus done and a failure found outside an update. */
export type UpdatePhase = (typeof UPDATE_STEPS)[number]['reports'][number] | 'done' | 'drift';

export const UPDATE_PHASES: readonly UpdatePhase[] = [...new Set<UpdatePhase>([...UPDATE_STEPS.flatMap((s) => s.reports), 'done', 'drift'])];

/** Points inside a step (the n-th file staged or committed, the rollback's files put back, the n-th hook action journaled as passed). */
const INNER_FAILPOINTS = ['staging-file', 'commit-file', 'rollback-files', 'hook-passed'] as const;

export type Failpoint = Extract<(typeof UPDATE_STEPS)[number], { failpoint: true }>['name'] | (typeof INNER_FAILPOINTS)[number];

export const FAILPOINTS: readonly Failpoint[] = [
  ...UPDATE_STEPS.flatMap((s) => (s.failpoint ? [s.name as Failpoint] : [])),
  ...INNER_FAILPOINTS,
];

export function stepNamed(name: string): (typeof UPDATE_STEPS)[number] {
  const step = UPDATE_STEPS.find((s) => s.name === name);
  if (!step) throw new Error(`the journal names an unknown update step "${name}"`);
  return step;
}

/** The step the update goes to from `from` on `event`: the table's transition, or an error naming both (a bug). */
export function nextStep(from: UpdateStep, event: StepEvent): UpdateStep {
  const next = (stepNamed(from).next as Partial<Record<StepEvent, UpdateStep>>)[event];
  if (!next) throw new Error(`the step table has no transition from ${from} on ${event}`);
  return next;
}

/** The step every update starts at. */
export const FIRST_STEP: UpdateStep = UPDATE_STEPS[0].name;

/** Whether the update is kept after a failure at this step (resumed, or undone when superseded). */
export function keptAfterFailure(name: UpdateStep): boolean {
  return stepNamed(name).undo === null;
}
