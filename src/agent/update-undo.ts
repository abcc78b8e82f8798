// The ways back, in one place: undoing an update that failed before its reboot, an unfinished
// one that a new config replaces, and rolling a node back to its previous config (a failed health
// gate). Each works from the journal alone, so a crash or a reboot in the middle resumes it, and
// none needs the control plane: the change being undone may have cut the host off from it.
//
// The engine calls these through the step table (update-steps.ts): a step's `undo`, and the
// rolling-back steps that follow a failed gate.

import { basename, dirname } from 'node:path';
import { finishUpdate, splitKernelArguments, UpdateStepError, type MachineConfigSpec, type NodeState } from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import { desiredFiles, sha256, type HostLayout } from './desired-files.ts';
import type { Advance, DesiredFile, FileTransaction } from './file-transaction.ts';
import type { Failpoints } from './failpoints.ts';
import type { Journal, JournalState, UndonePath } from './journal.ts';
import { applyOsChanges } from './os-operations.ts';
import { applyPasswordHash } from './password.ts';
import type { RpmOstree } from './rpm-ostree.ts';
import type { SystemdClient } from './systemd-client.ts';
import { applyUnitStates, runActions, undoAddedUnits } from './unit-operations.ts';
import type { UpdatePhase } from './update-steps.ts';

/** The parts of an assignment a recovery adopts. */
export interface RecoveredAssignment {
  config: string;
  spec: MachineConfigSpec;
  policy: JournalState['currentPolicy'];
  driftPolicy: JournalState['currentDriftPolicy'];
}

export interface UndoDeps {
  journal: Journal;
  files: FileTransaction;
  layout: HostLayout;
  systemd: SystemdClient;
  rpmOstree: RpmOstree;
  failpoints: Failpoints;
  log: Logger;
  advance: Advance;
  /** Runs work with the step deadline (stepTimeoutSeconds), naming the phase and the object. */
  within: <T>(phase: UpdatePhase, object: string, work: () => Promise<T>) => Promise<T>;
  report: (state: NodeState, phase: UpdatePhase, reason?: string) => void;
  /** Asks for the reboot (the process ends with the machine). */
  reboot: () => Promise<void>;
  bootId: () => string;
}

/** What the undo could and could not do: `reboot` when the deployment that boots next changed. */
export interface UndoResult {
  reboot: boolean;
  errors: string[];
}

export class UpdateUndo {
  readonly #d: UndoDeps;

  constructor(deps: UndoDeps) {
    this.#d = deps;
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
  async undoHost(): Promise<UndoResult> {
    const d = this.#d;
    const j = d.journal;
    const p = j.state.pending!;
    const previous = j.state.currentSpec;
    const errors: string[] = [];
    const attempt = async (what: string, work: () => Promise<unknown>): Promise<void> => {
      try {
        await d.within('rollback', what, work);
      } catch (err) {
        errors.push(`${what}: ${(err as Error).message}`);
      }
    };
    const created = new Set((p.fileOps ?? []).filter((op) => op.action === 'write' && !op.undo && dirname(op.hostPath) === d.layout.unitDir).map((op) => basename(op.hostPath)));
    await attempt('units the update added', () => undoAddedUnits(d.systemd, previous, p.toSpec, created, p.unitsBefore ?? {}));
    if (p.step === 'staging') d.files.abandonStaged();
    else if (p.step !== 'check' && p.step !== 'before-updating') {
      // Half-committed: roll forward first, so every op and backup is on record, then back.
      if (p.step === 'committing') d.files.commit();
      d.files.cleanupErrors = [];
      d.files.rollBack();
      errors.push(...d.files.cleanupErrors);
    }
    await attempt('systemd daemon-reload', () => d.systemd.reload());
    if (previous) {
      await attempt('units of the current config', () => applyUnitStates(d.systemd, p.toSpec, previous, false));
      await attempt('password of core', () => applyPasswordHash(d.layout.root, p.toSpec, previous));
    } else {
      // A first config: nothing was there before it; its retired units are already disabled.
    }
    const booted = p.rebootFromBootId !== undefined && d.bootId() !== p.rebootFromBootId;
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
      await attempt('rpm-ostree cleanup -p', () => d.rpmOstree.run(['cleanup', '-p']));
    }
    if (p.osChanged || p.step === 'units-done') {
      // The deployment that boots next must hold the current config's OS. Dropping the staged one
      // or rolling back goes to the deployment before it, which is not always the current
      // config's: after an earlier undo's rollback, the update was built on the deployment rolled
      // back to (not booted), which rpm-ostree may have pruned, so a cleanup or a second rollback
      // leaves the first undone update's deployment to boot next (its kernel type, extensions
      // and image with it). What it holds that the current config does not is changed back there.
      await attempt('rpm-ostree: the current config\'s OS in the next boot\'s deployment', async () => {
        const changed = await applyOsChanges(d.rpmOstree, p.toSpec, previous ?? emptyOs(p.toSpec), { kargs: j.state.undoneKargs, extensions: j.state.undoneExtensions });
        if (changed.length === 0) return;
        d.log.warn({ changed }, 'the deployment that boots next did not hold the current config\'s OS; staged it again');
        reboot = true;
      });
    }
    if (errors.length) d.log.error({ errors }, 'some of the update could not be undone');
    return { reboot, errors };
  }

  /**
   * Undoes the pending update, which did not finish, because `by` replaces it. Journaled first
   * (pending.undoing), so a kill in the middle finishes the undo on restart rather than resuming
   * the update. Returns the paths it wrote, for the next update's validation.
   */
  async undoUnfinished(by: string): Promise<UndonePath[]> {
    const d = this.#d;
    const j = d.journal;
    const p = j.state.pending!;
    d.log.warn({ config: p.to, step: p.step, by }, 'undoing an update that did not finish: a new config replaces it');
    if (!p.undoing) j.update((s) => { s.pending!.undoing = true; });
    let written = new Map<string, DesiredFile>();
    try {
      written = new Map(desiredFiles(p.toSpec, d.layout).map((f) => [f.hostPath, f]));
    } catch {
      // Its paths no longer resolve: nothing of it to check afterwards.
    }
    const undone: UndonePath[] = (p.fileOps ?? []).flatMap((op) => {
      const f = written.get(op.hostPath);
      return op.action === 'write' && f ? [{ hostPath: op.hostPath, object: f.object, existed: op.undo !== undefined, written: sha256(f.bytes) }] : [];
    });
    const { reboot } = await this.undoHost();
    d.files.release();
    j.update((s) => {
      if (reboot) s.undoReboot = `undoing the unfinished update to ${p.to} (its rpm-ostree deployment was booted)`;
      if (s.currentUpdate) s.lastUpdate = finishUpdate(s.currentUpdate, 'Superseded', `superseded by an update to ${by} before it finished; undone`, Date.now());
      s.currentUpdate = null;
      s.pending = null;
    });
    return undone;
  }

  /**
   * Puts the files, units and password of the previous config back, and rpm-ostree's previous
   * deployment. Returns 'wait' when a reboot was asked for (the rollback ends on the next boot).
   */
  async rollBackNode(): Promise<'wait' | 'rolled-back'> {
    const d = this.#d;
    const j = d.journal;
    const p = j.state.pending!;
    d.report('Working', 'rollback', `${p.rollbackFor === 'try' ? 'try' : 'health'}: ${p.rollbackCause}; returning to ${p.from || 'no config'}`);
    // The undo links are still there (finish() runs only after the gate): every old inode comes
    // back, with the units' states; the units the update added are disabled first.
    const { errors } = await this.undoHost();
    d.failpoints.hit('rollback-files');
    if (errors.length) throw new UpdateStepError('rollback', 'the previous config', errors.join('; '));
    if (p.plan?.reboot) {
      const bootId = d.bootId();
      d.advance('reboot', (s) => {
        s.pending!.rebootFromBootId = bootId;
        s.lastDisruption = p.rollbackFor === 'try' ? 'reboot: revert after a try that was not confirmed' : 'reboot: rollback after a failed health check';
      });
      await d.reboot();
      return 'wait';
    }
    // No reboot: the services the update restarted run again on the old files.
    const actions = (p.plan?.actions ?? []).filter((a) => a.type === 'restart' || a.type === 'reload' || a.type === 'daemon-reload');
    await d.within('rollback', 'restarting services on the old files', () => runActions(d.systemd, actions)).catch((err: unknown) => {
      d.log.error({ err: (err as Error).message }, 'a service did not restart on the old files');
    });
    return 'rolled-back';
  }

  /**
   * The node is back on the previous config: RolledBack after a failed health gate, TryReverted
   * after a try that was not confirmed, with why.
   */
  recordRolledBack(): void {
    const d = this.#d;
    const j = d.journal;
    const p = j.state.pending!;
    const tried = p.rollbackFor === 'try';
    const cause = p.rollbackCause ?? (tried ? 'the try was not confirmed' : 'the health check failed');
    const back = p.from || 'no config';
    const how = p.osChanged ? ' (rpm-ostree rollback and a reboot)' : p.plan?.reboot ? ' (with a reboot)' : '';
    const reason = `${tried ? 'try' : 'health'}: ${cause}; ${tried ? 'reverted' : 'rolled back'} to ${back}${how}; \`mcctl node reapply\` retries ${p.to}, a new config replaces it`;
    const state: NodeState = tried ? 'TryReverted' : 'RolledBack';
    const phase: UpdatePhase = tried ? 'try' : 'health';
    d.files.release();
    j.update((s) => {
      s.failure = { state, phase, reason, config: s.pending!.to };
      s.pending = null;
      if (s.currentUpdate) s.lastUpdate = finishUpdate(s.currentUpdate, state as 'RolledBack' | 'TryReverted', reason, Date.now());
      s.currentUpdate = null;
    });
    d.log.warn({ config: back, failed: j.state.failure!.config, state }, tried ? 'node reverted its try' : 'node rolled back');
    d.report(state, phase, reason);
  }

  /**
   * After a corrupt journal: the agent no longer knows what it applied, so it checks the disk
   * (files, units, password, booted deployment) against the desired config (`mismatches`). If all
   * match, it adopts the config without touching anything (no reboot); otherwise the caller
   * applies it in full. Returns whether it adopted, and the note the node's reason carries.
   */
  async recover(a: RecoveredAssignment, note: string, mismatchesOf: (spec: MachineConfigSpec) => Promise<string[]>): Promise<{ adopted: boolean; note: string }> {
    const d = this.#d;
    const j = d.journal;
    d.report('Working', 'check', `${note}; checking the disk against ${a.config}`);
    const mismatches = await mismatchesOf(a.spec);
    if (mismatches.length === 0) {
      j.update((s) => {
        s.currentConfig = a.config;
        s.currentSpec = a.spec;
        s.currentPolicy = a.policy;
        s.currentDriftPolicy = a.driftPolicy;
        s.recovered = null;
        s.failure = null;
      });
      d.log.warn({ config: a.config }, 'recovered from a corrupt journal: the disk matches the desired config; adopted it without changes');
      return { adopted: true, note: `${note}; the disk matches ${a.config}, adopted without changes` };
    }
    d.log.warn({ config: a.config, mismatches }, 'recovered from a corrupt journal: the disk differs from the desired config; applying it in full');
    j.update((s) => { s.recovered = null; });
    return { adopted: false, note: `${note}; the disk differed from ${a.config} (${mismatches.length} difference${mismatches.length === 1 ? '' : 's'}), applying it in full` };
  }

  /**
   * `rpm-ostree rollback` makes the previous deployment the default for the next boot. Run it
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
}

/** The OS of "no config": what a first config's undo goes back to. */
function emptyOs(spec: MachineConfigSpec): MachineConfigSpec {
  return { ...spec, kernelArguments: [], kernelType: 'default', extensions: [], osImageURL: '' };
}
