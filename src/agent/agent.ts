// mcplane-agent: the session with the control plane, the update engine, drift detection and the
// status that ties them together.

import { readFileSync } from 'node:fs';
import {
  API_VERSION,
  driftedConditionMessage,
  driftIgnoreProblem,
  parseAssignedDisruptionPolicy,
  parseAssignedDriftPolicy,
  parseHealthCheck,
  parseTryPolicy,
  parseLifecycleHooks,
  type LifecycleHooks,
  parseMachineConfig,
  SystemdError,
  ProblemCollector,
  type DisruptionPolicy,
  type Drift,
  type DriftPolicy,
  type HealthCheck,
  type NodeCondition,
  type TryPolicy,
  type NodeStatus,
  type OsStatus,
} from '../machineconfig/index.ts';
import type { Assignment__Output } from '../runtime/generated/mcplane/v1/Assignment.ts';
import type { Logger } from '../runtime/logger.ts';
import { readTlsFiles } from '../runtime/tls.ts';
import { VERSION } from '../runtime/version.ts';
import { startMetricsServer, type MetricsServer } from '../runtime/metrics-http.ts';
import type { AgentConfig } from './agent-config.ts';
import { AgentMetrics } from './agent-metrics.ts';
import { desiredFiles, layoutOf } from './desired-files.ts';
import { withNodeContent } from './drift-content.ts';
import { describeDrift, DriftMonitor, ignorePath } from './drift-monitor.ts';
import { DriftReconciler } from './drift-reconciler.ts';
import { DriftSettings } from './drift-settings.ts';
import { recoverCertificateFiles } from './certificate-store.ts';
import { enrollIfNeeded } from './enrollment.ts';
import { Failpoints } from './failpoints.ts';
import { Journal } from './journal.ts';
import { readKernelCmdline } from './kernel-cmdline.ts';
import { createRebooter } from './reboot.ts';
import { PinnedImageSets } from './pinned-image-sets.ts';
import { OsStaging } from './os-staging.ts';
import { RpmOstree } from './rpm-ostree.ts';
import { AgentSession } from './session.ts';
import { SystemdClient } from './systemd-client.ts';
import { unitMismatches } from './unit-operations.ts';
import { UpdateEngine, type Assignment, type EngineStatus } from './update-engine.ts';

/** How soon drift found while an update is ending is looked at again. */
const RECHECK_BUSY_MS = 200;

export class Agent {
  readonly journal: Journal;
  readonly engine: UpdateEngine;
  readonly drift: DriftMonitor;
  readonly metrics: AgentMetrics;
  /** The pool's pinned image sets: pulled and pinned on their own, never through the update engine. */
  readonly pinnedImages: PinnedImageSets;
  readonly staging: OsStaging;
  session: AgentSession | undefined;
  #metricsServer: MetricsServer | undefined;
  #systemd: SystemdClient;
  #rpm: RpmOstree;
  #os: OsStatus | null = null;
  #driftFound: Drift[] = [];
  #latest: Assignment | undefined;
  #lastAssignmentKey = '';
  #lastBeside = '';
  /** The engine's last pushed status (progress and the journal's record). */
  #engineStatus: EngineStatus;
  /** Set while a drift-policy Reconcile rewrite runs: its drift stays reported afterwards. */
  #reconciling = false;
  /** What the running Reconcile rewrite says of itself in the node's history (its record's cause). */
  #reconcileCause: string | undefined;
  readonly #reconciler: DriftReconciler;
  /** The pool's driftPolicy and driftIgnore, from the latest assignment (kept across restarts). */
  readonly #driftSettings: DriftSettings;
  /** Under Adopt, while drift is reported: the node's Drifted condition. */
  #drifted: NodeCondition | null = null;

  readonly config: AgentConfig;
  private readonly log: Logger;
  private constructor(config: AgentConfig, log: Logger) {
    this.config = config;
    this.log = log;
    this.journal = new Journal(config.paths.stateDir);
    this.metrics = new AgentMetrics(config.paths.stateDir, () => this.bootId());
    this.#systemd = SystemdClient.connect(config.systemdBus, config.jobTimeoutSeconds * 1000, config.dbusTimeoutSeconds * 1000);
    this.#rpm = new RpmOstree(config.rpmOstree, log, (attempt, retryInMs) =>
      this.engine.note(`rpm-ostree is busy with another transaction; retry ${attempt} in ${(retryInMs / 1000).toFixed(1)}s`), undefined, config.rpmOstreeTimeoutSeconds * 1000);
    // The pinned image sets are part of staging: a config is Staged once they are pulled too.
    this.staging = new OsStaging(this.#rpm, config.staging, config.paths.stateDir, log, () => this.#publish(), () => this.engine.busy, () => this.pinnedImages.readiness());
    this.drift = new DriftMonitor(log, config.drift.intervalSeconds * 1000, (found) => this.#onDrift(found));
    this.pinnedImages = new PinnedImageSets({
      criSocket: config.criSocket, root: config.paths.root, ...config.pinnedImages,
      reloadRuntime: () => this.#systemd.reloadUnit('crio.service'),
      onChange: () => {
        this.staging.pinnedChanged();
        this.#publish();
      },
      log,
    });
    this.#driftSettings = new DriftSettings(config.paths.stateDir);
    this.#reconciler = new DriftReconciler({
      maxRewrites: config.drift.reconcileMaxRewrites,
      backoffMs: config.drift.reconcileBackoffSeconds * 1000,
      windowMs: config.drift.reconcileWindowSeconds * 1000,
    });
    this.engine = new UpdateEngine({
      config, journal: this.journal, systemd: this.#systemd, rpmOstree: this.#rpm,
      rebooter: createRebooter(config.reboot), failpoints: new Failpoints(), log, staging: this.staging,
      controlPlaneConnected: () => this.session?.connected ?? false,
      onStatus: (p) => {
        this.#engineStatus = p;
        this.metrics.progress(p);
        if (p.state === 'Working') this.drift.stop();
        if (p.state !== 'Working' && this.#reconcileCause) {
          // The rewrite's record says what started it, before anyone hears it finished.
          const cause = this.#reconcileCause;
          this.#reconcileCause = undefined;
          this.journal.update((s) => { if (s.lastUpdate) s.lastUpdate = { ...s.lastUpdate, cause }; });
          // The status pushed with this change was taken before the cause: take it again.
          this.#engineStatus = this.engine.status();
          if (p.state !== 'Done') {
            // The rewrite failed (the file changed again before its validation): it counted, and
            // the watch decides the next one (or gives up) as for any drift.
            this.#reconciling = false;
            this.#watchDrift();
          }
        }
        if (p.state === 'Done' && p.phase === 'done') {
          if (!this.#reconciling) this.#driftFound = [];
          this.#drifted = null;
          this.metrics.drift(this.#driftFound);
          this.#reconciling = false;
          // Watch before the control plane hears "Done", so no edit can slip in between.
          this.#watchDrift();
          void this.#refreshOs().then(() => this.#publish());
        }
        this.#publish();
      },
    });
    this.#engineStatus = this.engine.status();
  }

  /** `onEnrollmentWait`: told, before each wait, what the host waits for to join and how long until it says more. */
  static async start(config: AgentConfig, log: Logger, hooks: { onEnrollmentWait?: (status: string, forMs: number) => void } = {}): Promise<Agent> {
    const agent = new Agent(config, log);
    try {
      await agent.#systemd.subscribe();
    } catch (err) {
      const lost = agent.#systemd.lastLoss;
      agent.#systemd.close();
      const cause = lost ?? (err as Error).message;
      throw new SystemdError(`cannot reach systemd over D-Bus at ${busName(config.systemdBus)}: ${cause}. Check that systemd is running there, or set systemdBus in the agent config ("system" on a host, or a unix:path= address)`);
    }
    await agent.#refreshOs();
    agent.metrics.start(agent.engine.progress);
    await agent.#serveMetrics();
    // Finish or undo whatever a crash or reboot interrupted before talking to anyone.
    agent.engine.resumeAfterRestart();
    if (!agent.journal.state.pending && agent.journal.state.currentSpec) agent.#watchDrift();
    await enrollIfNeeded(config, log, hooks.onEnrollmentWait ? { onWaiting: hooks.onEnrollmentWait } : {});
    // A renewal a restart interrupted is finished (or dropped) before the files are read.
    if (config.tls) recoverCertificateFiles(config.tls, log);
    if (config.tls) agent.metrics.certificateFile(config.tls.cert, config.nodeName);
    agent.session = new AgentSession({
      servers: config.servers,
      tls: config.tls ? readTlsFiles(config.tls, 'agent TLS') : undefined,
      ...(config.tls ? { tlsFiles: config.tls } : {}),
      nodeName: config.nodeName,
      labels: config.labels,
      agentVersion: VERSION,
      heartbeatMs: config.heartbeatSeconds * 1000,
      bootId: () => agent.bootId(),
      status: agent.status(),
      onAssignment: (a) => agent.#onAssignment(a),
      onForceReapply: (by) => agent.forceReapply(by),
      onConfirmTry: (config, by) => agent.confirmTry(config, by),
      log,
    });
    agent.session.start();
    return agent;
  }

  bootId(): string {
    try {
      return readFileSync(this.config.paths.bootIdFile, 'utf8').trim();
    } catch {
      return '';
    }
  }

  /** The node's status from what the engine, the drift monitor and rpm-ostree last said. */
  status(): NodeStatus {
    const e = this.#engineStatus;
    return {
      currentConfig: e.currentConfig,
      desiredConfig: e.desiredConfig,
      state: e.state,
      phase: e.phase,
      reason: e.reason,
      drift: this.#driftFound,
      os: this.#os,
      bootId: this.bootId(),
      agentVersion: VERSION,
      lastDisruption: e.lastDisruption,
      currentUpdate: e.currentUpdate,
      lastUpdate: e.lastUpdate,
      pinnedImageSets: this.pinnedImages.status(),
      driftPolicy: this.#driftPolicy(),
      drifted: this.#drifted,
      staging: this.staging.status(),
      // pinned-image-sets-only: the agent takes an assignment of pinned sets alone (while held for a drain).
      agentFeatures: ['staging', 'pinned-image-sets-only'],
    };
  }

  #driftPolicy(): DriftPolicy {
    return this.#driftSettings.policy(this.journal.state.currentDriftPolicy);
  }

  /** Hands the session the status, which sends it when it differs from what the server has. */
  #publish(): void {
    this.session?.report(this.status());
  }

  /** mcctl confirm: the try of `config` in progress is confirmed by hand (journaled by the engine). */
  confirmTry(config: string, requestedBy: string): void {
    if (this.engine.confirmTry(config, requestedBy)) this.log.info({ config, requestedBy }, 'try confirmed by hand');
    else this.log.warn({ config, requestedBy }, 'a confirmation came for a try this node is not in; ignored');
  }

  /** MCO's forcefile: re-apply the whole desired config, rewriting files that already match. */
  forceReapply(requestedBy: string): void {
    const a = this.#latest ?? this.#currentAssignment();
    if (!a) {
      this.log.warn({ requestedBy }, 'forced re-apply requested but no config has been assigned yet');
      return;
    }
    this.log.info({ requestedBy, config: a.config }, 'forced re-apply');
    // An operator's re-apply: Reconcile's count of rewrites starts afresh.
    this.#reconciler.reset();
    this.engine.assign(a, true);
  }

  /**
   * /metrics is an aid, not the agent's job: an address that cannot be bound (taken, say) is
   * logged and the agent carries on configuring the host without it.
   */
  async #serveMetrics(): Promise<void> {
    const { listen, allowNonLoopback } = this.config.metrics;
    if (!listen) return;
    try {
      this.#metricsServer = await startMetricsServer({ listen, allowNonLoopback, setting: 'metrics.listen', optIn: 'metrics.allowNonLoopback: true', registry: this.metrics.registry, log: this.log });
      this.log.info({ metrics: `http://${this.#metricsServer.address}/metrics` }, 'metrics served');
    } catch (err) {
      this.log.error({ err: (err as Error).message }, 'metrics are not served; the agent runs on without them');
    }
  }

  async stop(): Promise<void> {
    await this.#metricsServer?.close();
    this.session?.stop();
    this.drift.stop();
    this.pinnedImages.stop();
    this.staging.stop();
    await this.engine.idle();
    this.#systemd.close();
  }

  /**
   * Every part of an assignment is checked as the control plane checked it when it was applied:
   * a server (or a stand-in, or a newer version) that sends something malformed must not crash
   * the agent or half-apply it. A malformed assignment leaves the host alone and makes the node
   * Degraded, naming the part, the field and the rule; the next valid one clears it.
   */
  #onAssignment(a: Assignment__Output): void {
    // The pinned image sets go their own way: a set the puller refuses (a tag, say) is reported
    // in its status, never a reason to refuse the config, and a malformed config does not hold them.
    if (a.pinnedImageSetsSent) this.pinnedImages.assign(a.pinnedImageSets.map((p) => ({ name: p.name, generation: p.generation, images: p.images })));
    // The node's assignment is held for its drain: only the sets come, the rest stays as it is.
    if (a.pinnedImageSetsOnly) return;
    const c = new ProblemCollector(`RenderedConfig/${a.renderedConfig}`);
    const bad = (what: string): void => {
      const problems = c.problems.map((p) => `${p.field}: ${p.message}`).join('; ');
      this.log.error({ config: a.renderedConfig, problems: c.problems }, 'the assignment is malformed; the host is left as it is');
      this.engine.markFailed('Degraded', 'check', `check: ${a.renderedConfig}: ${what}: ${problems}`);
    };
    const json = (text: string, field: string, what: string): unknown => {
      try {
        return JSON.parse(text);
      } catch (err) {
        c.add(field, 'json', `${what} is not JSON: ${(err as Error).message}`);
        return undefined;
      }
    };
    if (!a.renderedConfig) c.add('renderedConfig', 'required', 'the assignment names no rendered config');
    const spec = c.ok ? json(a.specJson, 'spec', "the assignment's spec") : undefined;
    const mc = c.ok ? parseMachineConfig({ apiVersion: API_VERSION, kind: 'MachineConfig', metadata: { name: a.renderedConfig }, spec }, c) : undefined;
    if (!mc) return bad('the assignment is not a valid rendered config');
    // The pool's health gate, checked as the pool's spec was.
    let healthCheck: HealthCheck | null = null;
    if (a.healthCheckJson) {
      const raw = json(a.healthCheckJson, 'healthCheck', "the assignment's health check");
      if (c.ok) healthCheck = parseHealthCheck(raw, c, 'healthCheck') ?? null;
      if (!c.ok) return bad("the assignment's health check is invalid");
    }
    let policy: DisruptionPolicy | null = null;
    if (a.disruptionPolicyJson) {
      const raw = json(a.disruptionPolicyJson, 'disruptionPolicy', "the assignment's disruption policy");
      if (c.ok) policy = parseAssignedDisruptionPolicy(raw, c, 'disruptionPolicy') ?? null;
      if (!c.ok) return bad("the assignment's disruption policy is invalid");
    }
    const driftPolicy = parseAssignedDriftPolicy(a.driftPolicy, c, 'driftPolicy');
    if (!driftPolicy) return bad("the assignment's drift policy is invalid");
    const ignore = (a.driftIgnore ?? []).filter((g) => typeof g === 'string');
    ignore.forEach((g, i) => {
      const problem = driftIgnoreProblem(g);
      if (problem) c.add(`driftIgnore[${i}]`, 'drift-ignore', problem);
    });
    if (!c.ok) return bad("the assignment's driftIgnore is invalid");
    // Try mode (the pool's spec.rollout.confirm), checked as the pool's spec was.
    let tryPolicy: TryPolicy | null = null;
    if (a.tryJson) {
      const raw = json(a.tryJson, 'try', "the assignment's try");
      if (c.ok) tryPolicy = parseTryPolicy(raw, c, 'try') ?? null;
      if (!c.ok) return bad("the assignment's try is invalid");
    }
    // Lifecycle hooks (the pool's spec.hooks and the configs' mcplane.io/hooks), checked as applied.
    let hooks: LifecycleHooks | null = null;
    if (a.hooksJson) {
      const raw = json(a.hooksJson, 'hooks', "the assignment's hooks");
      if (c.ok) hooks = parseLifecycleHooks(raw, c, 'hooks') ?? null;
      if (!c.ok) return bad("the assignment's hooks are invalid");
    }
    const assignment: Assignment = { config: a.renderedConfig, spec: mc.spec, policy, driftPolicy, healthCheck, try: tryPolicy, hooks };
    this.#latest = assignment;
    if (a.renderedConfig !== this.journal.state.currentConfig) this.#reconciler.reset();
    if (this.#driftSettings.update({ policy: driftPolicy, ignore })) this.#driftSettingsChanged();
    // A message that changes only what the update engine does not run with (what to stage, the
    // pinned image sets, driftIgnore: each acted on by itself, here) is not the config handed
    // again: a node Degraded on its config (drift, say) must not re-apply it for that. What the
    // engine runs with, the try among it, is the key; a message identical to the last one (sent
    // again on a new stream) still reaches the engine, as before.
    const key = JSON.stringify([a.renderedConfig, a.specJson, a.disruptionPolicyJson, a.driftPolicy, a.healthCheckJson, a.tryJson]);
    const beside = JSON.stringify([a.stageConfig, ignore, a.pinnedImageSetsSent ? a.pinnedImageSets : null]);
    const besideOnly = key === this.#lastAssignmentKey && beside !== this.#lastBeside;
    this.#lastAssignmentKey = key;
    this.#lastBeside = beside;
    if (!besideOnly) this.engine.assign(assignment);
    if (a.stageConfig && a.stageConfig !== a.renderedConfig) this.#stage(a.stageConfig, a.stageSpecJson);
  }

  /**
   * The config the node gets next, to download ahead (os-staging.ts). Checked as an assignment
   * is; a malformed one is logged and staged not at all (the node keeps serving, and the
   * control plane, seeing no Staged, gives it nothing).
   */
  #stage(config: string, specJson: string): void {
    const c = new ProblemCollector(`RenderedConfig/${config}`);
    let spec: unknown;
    try {
      spec = JSON.parse(specJson);
    } catch (err) {
      c.add('stageSpec', 'json', `the staged config's spec is not JSON: ${(err as Error).message}`);
    }
    const mc = c.ok ? parseMachineConfig({ apiVersion: API_VERSION, kind: 'MachineConfig', metadata: { name: config }, spec }, c) : undefined;
    if (!mc) {
      this.log.error({ config, problems: c.problems }, 'the config to stage is malformed; nothing is downloaded');
      return;
    }
    this.staging.stage(config, mc.spec);
  }

  #currentAssignment(): Assignment | undefined {
    const j = this.journal.state;
    if (j.pending) return { config: j.pending.to, spec: j.pending.toSpec, policy: j.pending.policy, driftPolicy: j.pending.driftPolicy, healthCheck: j.pending.healthCheck ?? null, try: j.pending.try ?? null, hooks: j.pending.hooks ?? null };
    if (!j.currentSpec) return undefined;
    return { config: j.currentConfig, spec: j.currentSpec, policy: j.currentPolicy, driftPolicy: j.currentDriftPolicy, healthCheck: j.currentHealthCheck ?? null };
  }

  async #refreshOs(): Promise<void> {
    try {
      this.#os = await this.#rpm.osStatus(readKernelCmdline(this.config.paths.kernelCmdlineFile));
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cannot read the OS status from rpm-ostree');
    }
  }

  #watchDrift(): void {
    const spec = this.journal.state.currentSpec;
    if (!spec) return;
    let files;
    try {
      files = desiredFiles(spec, layoutOf(this.config));
    } catch {
      return;
    }
    // Ignored paths are watched for nothing: not reported, not rewritten, not degrading the node.
    files = files.filter((f) => !this.#driftSettings.ignored(ignorePath(f)));
    // Enablement and masks have no file to hash: the drift carries the expected and actual state.
    this.drift.watch(files, async () => (await unitMismatches(this.#systemd, spec)).map((m) => ({
      path: m.unit, kind: 'unit' as const, expectedHash: m.expected, actualHash: m.actual, detectedUnixMs: Date.now(),
    })));
  }

  #onDrift(found: Drift[]): void {
    if (this.engine.busy) {
      // Found at the edge of an update (the watch restarts as it reports Done): looked at again
      // once it is over, not dropped (the drift is known now, so nothing would report it again).
      this.drift.recheckIn(RECHECK_BUSY_MS);
      return;
    }
    const policy = this.#driftPolicy();
    if (policy === 'Adopt') return this.#adopt(found);
    if (found.length === 0) {
      // Reconcile's drift gone by itself (put back while a rewrite waited): nothing to report.
      // Degrade's stays until the node is put right (mcctl node reapply), as before.
      if (policy === 'Reconcile' && this.engine.progress.state === 'Done' && this.#driftFound.length) {
        this.#driftFound = [];
        this.metrics.drift([]);
        this.#publish();
      }
      return;
    }
    this.#driftFound = found;
    this.metrics.drift(found);
    if (policy === 'Reconcile') return this.#reconcile(found);
    this.engine.markFailed('Degraded', 'drift', `drift: ${found.map(describeDrift).join('; ')}`);
  }

  /** Reconcile: the managed files rewritten (a forced re-apply), at most as often as drift-reconciler.ts allows each. */
  #reconcile(found: Drift[]): void {
    const decision = this.#reconciler.decide(found.map((d) => d.path));
    if (decision.action === 'give-up') {
      this.log.error({ files: decision.paths }, 'drift policy Reconcile: these files keep changing; no more rewrites');
      this.engine.markFailed('Degraded', 'drift', decision.reason);
      return;
    }
    if (decision.action === 'wait') {
      this.log.warn({ files: decision.paths, waitMs: decision.waitMs }, 'drift policy Reconcile: rewritten recently; the next rewrite waits');
      this.drift.recheckIn(decision.waitMs);
      this.#publish();
      return;
    }
    this.log.warn({ files: found.map((d) => d.path) }, 'drift policy Reconcile: rewriting the managed files');
    const a = this.#currentAssignment();
    this.#reconciling = true;
    if (a) {
      this.#reconcileCause = decision.cause;
      this.engine.assign(a, true);
    }
    this.#publish();
  }

  /** Adopt: the node keeps its files and reports their content for a proposal; it stays Done. */
  #adopt(found: Drift[]): void {
    this.#driftFound = found.length ? withNodeContent(found, (d) => this.drift.hostPathOf(d.path)) : [];
    this.metrics.drift(this.#driftFound);
    this.#drifted = found.length
      ? {
        type: 'Drifted', status: 'True', reason: 'Adopt',
        message: driftedConditionMessage(found, this.config.nodeName),
        lastTransitionTimeUnixMs: this.#drifted?.lastTransitionTimeUnixMs ?? Date.now(),
      }
      : null;
    if (found.length) this.log.warn({ files: found.map((d) => d.path) }, 'drift policy Adopt: the node keeps its version; reported for a proposal');
    this.#publish();
  }

  /** A new policy or ignore list acts at once on an idle node: the watch starts again under it. */
  #driftSettingsChanged(): void {
    this.log.info({ policy: this.#driftSettings.policy(this.journal.state.currentDriftPolicy), ignore: this.#driftSettings.ignore }, 'drift settings changed');
    if (this.engine.busy || this.journal.state.pending) return;
    this.#driftFound = [];
    this.#drifted = null;
    this.metrics.drift([]);
    // A node Degraded for drift on a path now ignored (or under a policy now Reconcile or Adopt)
    // is not left Degraded with nothing listed: the failure ends, and the watch below fails it
    // again if drift remains where it still looks.
    this.engine.clearDriftFailure();
    this.#watchDrift();
  }
}

function busName(which: string): string {
  if (which === 'system') return `the system bus (${process.env.DBUS_SYSTEM_BUS_ADDRESS ?? 'unix:path=/var/run/dbus/system_bus_socket'})`;
  if (which === 'session') return `the session bus (${process.env.DBUS_SESSION_BUS_ADDRESS ?? 'DBUS_SESSION_BUS_ADDRESS unset'})`;
  return which;
}
