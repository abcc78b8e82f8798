// The agent's Prometheus metrics, with MCO's daemon names where the concept is MCO's:
//   mcd_state{state,reason}     one series: the state the node is in, valued at the Unix time it
//                               entered it (MCO sets it the same way, SetToCurrentTime)
//   mcd_config_drift            the Unix time drift was detected, 0 when there is none (MCO:
//                               "timestamp for config drift"); mcplane_agent_drifted_objects
//                               says how many files and units drifted
//   mcd_reboots_failed_total    reboots asked for that failed
// and mcplane's own: how long each update phase took here (from the engine's progress
// transitions), the time left on the node's certificate, and the process' memory and CPU
// (prom-client's default metrics).

import { X509Certificate } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Drift, NodeState } from '../machineconfig/index.ts';
import type { Progress } from './update-engine.ts';
import { UPDATE_PHASES } from './update-steps.ts';

/** The phases the engine reports (the step table's); anything else is "other", so labels stay few. */
const PHASES: readonly string[] = UPDATE_PHASES;
const PHASE_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];
/** Reasons can be long; a label value of kilobytes would make every scrape heavy. */
const REASON_LIMIT = 200;
/** Where the time a reboot began is kept, so the next boot's agent can time the reboot. */
const REBOOT_MARK = 'metrics-reboot-started.json';

export class AgentMetrics {
  readonly registry = new Registry();
  readonly #state: Gauge<'state' | 'reason'>;
  readonly #drift: Gauge;
  readonly #drifted: Gauge;
  readonly #rebootsFailed: Counter;
  readonly #phaseDuration: Histogram<'phase'>;
  #current: { state: NodeState; phase: string; reason: string; since: number } | undefined;

  private readonly stateDir: string;
  private readonly bootId: () => string;
  private readonly now: () => number;
  constructor(stateDir: string, bootId: () => string, now: () => number = Date.now) {
    this.stateDir = stateDir;
    this.bootId = bootId;
    this.now = now;
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'mcplane_agent_' });
    this.#state = new Gauge({ name: 'mcd_state', help: 'State of the agent on this node (Done, Working, Degraded, Unreconcilable) and why; the value is the Unix time it entered that state (as MCO\'s mcd_state)', labelNames: ['state', 'reason'], registers });
    this.#drift = new Gauge({ name: 'mcd_config_drift', help: 'Unix time config drift was detected on this node; 0 when none (as MCO\'s mcd_config_drift)', registers });
    this.#drifted = new Gauge({ name: 'mcplane_agent_drifted_objects', help: 'Managed files and units that differ from the config right now', registers });
    this.#rebootsFailed = new Counter({ name: 'mcd_reboots_failed_total', help: 'Total number of reboots that failed (as MCO\'s mcd_reboots_failed_total)', registers });
    this.#phaseDuration = new Histogram({ name: 'mcplane_agent_update_phase_duration_seconds', help: 'How long each update phase took on this node (a reboot is timed from the request to the agent\'s start on the new boot)', labelNames: ['phase'], buckets: PHASE_BUCKETS, registers });
    this.#drift.set(0);
    this.#drifted.set(0);
  }

  /** The engine's state at start-up; times a reboot that the previous boot began. */
  start(progress: Progress): void {
    // What the engine resumes in was entered before this process: its duration is not known.
    this.#enter({ ...progress, phase: '' });
    let mark: { bootId: string; at: number } | undefined;
    try {
      mark = JSON.parse(readFileSync(join(this.stateDir, REBOOT_MARK), 'utf8'));
    } catch {
      return;
    }
    if (mark && typeof mark.at === 'number' && mark.bootId !== this.bootId()) {
      this.#phaseDuration.observe({ phase: 'reboot' }, Math.max(0, this.now() - mark.at) / 1000);
    }
    if (mark?.bootId !== this.bootId()) rmSync(join(this.stateDir, REBOOT_MARK), { force: true });
  }

  /** Every progress report of the engine. */
  progress(p: Progress): void {
    const c = this.#current;
    if (c && c.state === p.state && c.phase === p.phase && c.reason === p.reason) return;
    if (c && (c.state !== p.state || c.phase !== p.phase)) {
      if (c.state === 'Working' && c.phase) this.#phaseDuration.observe({ phase: phaseLabel(c.phase) }, Math.max(0, this.now() - c.since) / 1000);
      if (p.phase === 'reboot' && p.state !== 'Working') this.#rebootsFailed.inc();
      if (p.phase === 'reboot' && p.state === 'Working') {
        // Best effort: without it the reboot's duration is unknown, nothing worse.
        try {
          writeFileSync(join(this.stateDir, REBOOT_MARK), JSON.stringify({ bootId: this.bootId(), at: this.now() }));
        } catch { /* the state directory is the journal's; its own errors surface there */ }
      }
    }
    this.#enter(p, c && c.state === p.state && c.phase === p.phase ? c.since : undefined);
  }

  /**
   * mcplane_certificate_expiry_seconds{kind="node"} for the agent's certificate file, read at
   * each scrape (a renewed file shows at once), with the server's labels: alerts take the minimum
   * over the servers' view and the agents'. An unreadable file has no series; the agent's
   * connection errors say why.
   */
  certificateFile(path: string, nodeName: string): void {
    const gauge: Gauge<'kind' | 'name'> = new Gauge({
      name: 'mcplane_certificate_expiry_seconds', help: 'Seconds until this node\'s certificate expires (its notAfter; negative once it has)',
      labelNames: ['kind', 'name'], registers: [this.registry],
      collect: () => {
        gauge.reset();
        try {
          gauge.set({ kind: 'node', name: nodeName }, (Date.parse(new X509Certificate(readFileSync(path)).validTo) - this.now()) / 1000);
        } catch { /* no series */ }
      },
    });
  }

  drift(found: readonly Drift[]): void {
    if (found.length === 0) {
      this.#drift.set(0);
      this.#drifted.set(0);
      return;
    }
    const first = Math.min(...found.map((d) => d.detectedUnixMs || this.now()));
    this.#drift.set(first / 1000);
    this.#drifted.set(found.length);
  }

  #enter(p: Omit<Progress, 'phase'> & { phase: Progress['phase'] | '' }, since?: number): void {
    const changedState = this.#current?.state !== p.state || this.#current?.reason !== p.reason;
    this.#current = { state: p.state, phase: p.phase, reason: p.reason, since: since ?? this.now() };
    if (!changedState) return;
    this.#state.reset();
    this.#state.set({ state: p.state, reason: p.reason.length > REASON_LIMIT ? `${p.reason.slice(0, REASON_LIMIT - 1)}…` : p.reason }, this.now() / 1000);
  }
}

function phaseLabel(phase: string): string {
  return PHASES.includes(phase) ? phase : 'other';
}
