// One node update as a table of steps. Each entry is a step the journal records before it is
// taken (so a restart resumes there), the phases the node reports while it runs, how it runs,
// and what a failure there means: undone (the host goes back to the current config) or kept
// (resumed on restart or by the same config again, undone when another config replaces it).
// The journal's step, the node's phase, the failpoints and the metrics' phase labels are all
// derived from this table: adding a step is one entry here (and its work in the runner).

/** The engine's work, as the steps call it. Each returns what comes next. */
export interface StepRunner {
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

interface StepDef {
  readonly name: string;
  /** The phases the node reports while this step runs (its status). */
  readonly reports: readonly string[];
  readonly run: (r: StepRunner) => Promise<StepOutcome>;
  /** After a failure at this step: how the host goes back, or null to keep the update (see `kept`). */
  readonly undo: ((r: StepRunner) => Promise<unknown>) | null;
  /** The agent kills itself here under MCPLANE_FAILPOINT=<name>, once the step is journaled. */
  readonly failpoint: boolean;
}

export const UPDATE_STEPS = [
  { name: 'check', reports: ['check', 'diff', 'plan', 'apply'], run: (r) => r.checkAndApplyFiles(), undo: (r) => r.undoHost(), failpoint: false },
  { name: 'staging', reports: ['apply'], run: (r) => r.abandonStaged(), undo: (r) => r.undoHost(), failpoint: true },
  { name: 'committing', reports: ['apply'], run: (r) => r.commitFiles(), undo: (r) => r.undoHost(), failpoint: true },
  { name: 'files-done', reports: ['apply'], run: (r) => r.applyUnits(), undo: (r) => r.undoHost(), failpoint: false },
  { name: 'units-done', reports: ['apply'], run: (r) => r.applyOs(), undo: (r) => r.undoHost(), failpoint: true },
  { name: 'os-done', reports: ['actions', 'reboot'], run: (r) => r.actionsOrReboot(), undo: (r) => r.undoActions(), failpoint: true },
  // A reboot that failed is kept: the same config asks again, another one undoes it.
  { name: 'rebooting', reports: ['reboot'], run: (r) => r.rebootOrContinue(), undo: null, failpoint: true },
  { name: 'actions-done', reports: ['validate'], run: (r) => r.validate(), undo: null, failpoint: false },
  // A validation that failed is kept: a forced re-apply or another config comes next.
  { name: 'validating', reports: ['validate'], run: (r) => r.validate(), undo: null, failpoint: false },
  // The health gate, and the way back when it fails: each resumes after a crash or the reboot.
  { name: 'health', reports: ['health'], run: (r) => r.healthGate(), undo: null, failpoint: false },
  { name: 'rolling-back', reports: ['rollback'], run: (r) => r.rollBackNode(), undo: null, failpoint: true },
  { name: 'rollback-rebooting', reports: ['reboot'], run: (r) => r.rollbackRebootOrFinish(), undo: null, failpoint: false },
] as const satisfies readonly StepDef[];

/** Where an update is, as the journal records it. */
export type UpdateStep = (typeof UPDATE_STEPS)[number]['name'];

/** What the node reports while it updates, plus done and a failure found outside an update. */
export type UpdatePhase = (typeof UPDATE_STEPS)[number]['reports'][number] | 'done' | 'drift';

export const UPDATE_PHASES: readonly UpdatePhase[] = [...new Set<UpdatePhase>([...UPDATE_STEPS.flatMap((s) => s.reports), 'done', 'drift'])];

/** Points inside a step (the n-th file staged or committed, the rollback's files put back). */
const INNER_FAILPOINTS = ['staging-file', 'commit-file', 'rollback-files'] as const;

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

/** Whether the update is kept after a failure at this step (resumed, or undone when superseded). */
export function keptAfterFailure(name: UpdateStep): boolean {
  return stepNamed(name).undo === null;
}
