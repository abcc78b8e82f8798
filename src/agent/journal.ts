// The agent's local record of what it applied and what it is in the middle of, in one JSON file
// written atomically. Every step of an update is recorded before it is taken, so an agent
// killed at any instant knows on restart whether to roll back or roll forward.

import { mkdirSync, readFileSync, renameSync } from 'node:fs';
import { JournalError } from '../machineconfig/index.ts';
import { join } from 'node:path';
import type { DisruptionPlan, DisruptionPolicy, DriftPolicy, HealthCheck, LifecycleHooks, MachineConfigSpec, NodeState, TryPolicy, UpdateRecord } from '../machineconfig/index.ts';
import { fsyncPath, writeFileAtomic } from './durable-fs.ts';
import { UPDATE_STEPS, type UpdatePhase, type UpdateStep } from './update-steps.ts';

export type { UpdateStep };

/** The original of a path the agent took over, to put back when no config manages it. */
export interface BackupRecord {
  kind: 'file' | 'symlink';
  /** Copy of the original file's bytes (kind "file"). */
  backupFile?: string;
  linkTarget?: string;
  mode?: number;
  uid?: number;
  gid?: number;
}

export interface FileOp {
  hostPath: string;
  action: 'write' | 'delete';
  /** The staged new content, renamed over hostPath at commit. */
  temp?: string;
  /** A hard link to the old inode, renamed back on rollback. */
  undo?: string;
}

export interface PendingUpdate {
  id: string;
  from: string;
  to: string;
  toSpec: MachineConfigSpec;
  policy: DisruptionPolicy | null;
  driftPolicy: DriftPolicy;
  step: UpdateStep;
  /** A forced re-apply rewrites everything even where the disk already matches. */
  force: boolean;
  plan?: DisruptionPlan;
  fileOps?: FileOp[];
  backupsToAdd?: Record<string, BackupRecord>;
  backupsToDrop?: string[];
  /** Committed: originals this update put back, deleted once it is done, backups again if it rolls back. */
  droppedBackups?: Record<string, BackupRecord>;
  /** Committed: paths whose originals this update took over, forgotten again if it rolls back. */
  addedBackups?: string[];
  /** Boot id when the reboot was requested; a different one at start means it happened. */
  rebootFromBootId?: string;
  /** Said in the node's reason while this update runs (why it runs: a journal recovery). */
  note?: string;
  /** The pool's health gate for this update (spec.healthCheck). */
  healthCheck?: HealthCheck | null;
  /** rpm-ostree staged a deployment for this update: a rollback must go back to the previous one. */
  osChanged?: boolean;
  /** Why the health gate or the try failed, kept while the node rolls back (across its reboot too). */
  rollbackCause?: string;
  /** What the rollback follows: a failed health gate (the default) or a try that was not confirmed. */
  rollbackFor?: 'health' | 'try';
  /** Try mode for this update (the pool's spec.rollout.confirm); null or absent: no try. */
  try?: TryPolicy | null;
  /** When the try reverts unless its checks passed or it was confirmed (Unix ms), set as it starts. */
  tryDeadline?: number;
  /** The check that failed last while trying, with its output: the revert's cause after a restart too. */
  tryProblem?: string;
  /** Who confirmed the try by hand (mcctl confirm), before its checks passed. */
  tryConfirmedBy?: string;
  /** Lifecycle hooks for this update (lifecycle-hooks.ts); null or absent: none. */
  hooks?: LifecycleHooks | null;
  /**
   * The hook actions that passed (or were skipped on their `if`), "beforeUpdating[0]": a
   * restarted agent does not run them again.
   */
  hooksPassed?: string[];
  /**
   * Set while this update is being undone because a new config replaced it before it finished
   * (its reboot failed, say): a restart finishes the undo instead of resuming the update.
   */
  undoing?: boolean;
  /** Unit file states before this update, of the units it sets and the current config does not pin: an undo restores them. */
  unitsBefore?: Record<string, string>;
  /** Paths an unfinished update before this one wrote and this config does not manage: validation checks they were undone. */
  undone?: UndonePath[];
}

/** A path an undone update wrote: absent again if it created it, else no longer its content. */
export interface UndonePath {
  hostPath: string;
  object: string;
  existed: boolean;
  /** sha256 of what the undone update wrote there. */
  written: string;
}

export interface JournalState {
  version: 1;
  currentConfig: string;
  currentSpec: MachineConfigSpec | null;
  /** The pool policies that came with the current config. */
  currentPolicy: DisruptionPolicy | null;
  currentDriftPolicy: DriftPolicy;
  /** The health check that came with the current config. */
  currentHealthCheck?: HealthCheck | null;
  backups: Record<string, BackupRecord>;
  pending: PendingUpdate | null;
  lastDisruption: string;
  /**
   * Set while the node is Degraded, Unreconcilable or RolledBack, cleared by a successful update.
   * `config` is the config it failed on: a RolledBack node does not take that one again unforced.
   */
  failure: { state: NodeState; phase: UpdatePhase; reason: string; config?: string } | null;
  /**
   * Set when the journal was found corrupt and moved aside: until the next assignment has been
   * checked against the disk, the agent does not know what it applied.
   */
  recovered?: { movedTo: string; cause: string } | null;
  /**
   * The timeline of the update running now (phases with start and end), kept here so it
   * survives the agent's restart and the reboot in its middle; absent in older journals.
   */
  currentUpdate?: UpdateRecord | null;
  /** The last update that finished, as reported until the control plane has it in its history. */
  lastUpdate?: UpdateRecord | null;
  /**
   * Set when undoing an unfinished update made rpm-ostree's previous deployment the next boot's
   * (the update's own was booted): the next update reboots, whatever its own plan says.
   */
  undoReboot?: string | null;
  /**
   * Kernel arguments of unfinished updates that were undone: should a deployment of theirs still
   * be rpm-ostree's pending one (its cleanup failed, or was cut short by a kill), the next update
   * takes those its config does not want out of it. Cleared when an update is done.
   */
  undoneKargs?: string[] | null;
  /** Extensions of unfinished updates that were undone, kept and cleared as `undoneKargs` are. */
  undoneExtensions?: string[] | null;
}

const EMPTY = (): JournalState => ({ version: 1, currentConfig: '', currentSpec: null, currentPolicy: null, currentDriftPolicy: 'Degrade', backups: {}, pending: null, lastDisruption: '', failure: null });

export class Journal {
  readonly path: string;
  readonly backupDir: string;
  state: JournalState;

  readonly stateDir: string;
  constructor(stateDir: string) {
    this.stateDir = stateDir;
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    this.path = join(stateDir, 'journal.json');
    this.backupDir = join(stateDir, 'backups');
    mkdirSync(this.backupDir, { recursive: true, mode: 0o700 });
    this.state = this.#read();
  }

  /** Changes the state and writes it durably before returning. */
  update(change: (s: JournalState) => void): void {
    change(this.state);
    writeFileAtomic(this.path, JSON.stringify(this.state), { mode: 0o600 });
  }

  #read(): JournalState {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return EMPTY();
      // Unreadable is not empty: starting afresh would forget what is half-applied on disk.
      throw new JournalError(`cannot read the journal ${this.path}: ${(err as Error).message}; fix the file's type or permissions (it must be a regular file root can read), or move it aside to have the agent recover from the disk`);
    }
    let cause: string | undefined;
    try {
      const parsed = JSON.parse(text) as JournalState;
      cause = shapeProblem(parsed);
      if (!cause) return parsed;
    } catch (err) {
      cause = `not JSON: ${(err as Error).message}`;
    }
    // Corrupt: keep it for a post-mortem, and start from what the disk says.
    const movedTo = `${this.path}.corrupt-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    renameSync(this.path, movedTo);
    fsyncPath(this.stateDir);
    const state = EMPTY();
    state.recovered = { movedTo, cause };
    writeFileAtomic(this.path, JSON.stringify(state), { mode: 0o600 });
    return state;
  }
}

/** What makes a parsed journal unusable, or undefined. */
function shapeProblem(j: JournalState): string | undefined {
  if (typeof j !== 'object' || j === null || Array.isArray(j)) return 'not an object';
  if (j.version !== 1) return `unknown version ${JSON.stringify(j.version)}`;
  if (typeof j.currentConfig !== 'string') return 'currentConfig is not a string';
  if (typeof j.backups !== 'object' || j.backups === null) return 'backups is not an object';
  if (j.pending !== null && (typeof j.pending !== 'object' || typeof j.pending.step !== 'string' || typeof j.pending.to !== 'string')) return 'pending is malformed';
  if (j.pending !== null && !UPDATE_STEPS.some((s) => s.name === j.pending!.step)) return `pending.step ${JSON.stringify(j.pending.step).slice(0, 60)} is not a step of an update`;
  return undefined;
}
