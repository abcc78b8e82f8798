// mcplane-server's Prometheus metrics. The fleet's gauges are computed when Prometheus scrapes,
// from this replica's cache (which every replica keeps current through the store's watch), so
// any replica answers with the whole fleet: each series carries a `replica` label, and queries
// over several replicas take max by (pool). Latencies and phase durations are this replica's
// own observations (histograms): sum them over replicas.
//
// Pool counts use MCO's metric names (mco_*) and the pool status the leader stored: the same
// numbers `mcctl get pools` shows.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { NodeState } from '../../machineconfig/index.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import type { Store } from '../store/store.ts';
import { servedCertificates, type ServedCertificate } from './certificate-expiry.ts';
import { phaseLabel, PhaseTracker } from './phase-tracker.ts';
import { RolloutEta } from './rollout-eta.ts';

// Every state a node reports, failed ones included (a health gate's RolledBack, a try's
// TryReverted): each has its series from the start, so an alert on it sees 0, not nothing.
const NODE_STATES: readonly NodeState[] = ['Done', 'Working', 'Degraded', 'Unreconcilable', 'RolledBack', 'TryReverted'];

/** Update phases take from well under a second (plan) to many minutes (reboot, drain). */
const PHASE_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** What the fleet gauges read; given once the control plane exists. */
export interface MetricsSource {
  cache: ClusterCache;
  leading(): boolean;
  /** Whether this replica holds the node's agent stream. */
  holdsStream(node: string): boolean;
}

export class ServerMetrics {
  readonly registry = new Registry();
  readonly #phaseDuration: Histogram<'phase'>;
  readonly #renderDuration: Histogram<'result'>;
  readonly #storeDuration: Histogram<'backend' | 'operation'>;
  readonly #renders: Counter<'result'>;
  readonly phases: PhaseTracker;
  readonly eta = new RolloutEta();
  #source: MetricsSource | undefined;
  #certificates: ServedCertificate[] = [];

  private readonly replicaName: string;
  constructor(replicaName: string) {
    this.replicaName = replicaName;
    this.registry.setDefaultLabels({ replica: replicaName });
    const registers = [this.registry];
    this.#phaseDuration = new Histogram({
      name: 'mcplane_update_phase_duration_seconds',
      help: 'How long nodes spent in each update phase, from the phase transitions in the status reports this replica received (sum over replicas for the fleet)',
      labelNames: ['phase'], buckets: PHASE_BUCKETS, registers,
    });
    this.#renderDuration = new Histogram({
      name: 'mcplane_render_duration_seconds',
      help: 'Time to render one pool (merge its MachineConfigs), on the leader',
      labelNames: ['result'], buckets: LATENCY_BUCKETS, registers,
    });
    this.#renders = new Counter({
      name: 'mcplane_renders_total',
      help: 'Pool renders on this replica while it led, by result (ok, failed)',
      labelNames: ['result'], registers,
    });
    this.#storeDuration = new Histogram({
      name: 'mcplane_store_request_duration_seconds',
      help: 'Store latency seen by this replica, by backend (sqlite, etcd) and operation (commit, list)',
      labelNames: ['backend', 'operation'], buckets: LATENCY_BUCKETS, registers,
    });
    this.phases = new PhaseTracker((phase, seconds) => this.#phaseDuration.observe({ phase }, seconds));
    this.#fleetGauges();
  }

  /**
   * The process' memory, CPU and event loop (prom-client's default metrics), once /metrics is
   * served: they keep observers running, which a server that serves no metrics need not pay for.
   */
  collectProcessMetrics(): void {
    if (this.#processMetrics) return;
    this.#processMetrics = true;
    collectDefaultMetrics({ register: this.registry, prefix: 'mcplane_server_' });
  }

  #processMetrics = false;

  /** Starts following the cluster; the fleet gauges are empty until then. */
  bind(source: MetricsSource): void {
    this.#source = source;
    const { cache } = source;
    for (const [name, node] of cache.nodes) {
      this.eta.observe(node, name, true);
      this.phases.report(name, node.status, false);
    }
    cache.on('change', (change: CacheChange) => {
      const names = change.resync ? new Set([...cache.nodes.keys(), ...change.nodes]) : change.nodes;
      for (const name of names) {
        const node = cache.nodes.get(name);
        this.eta.observe(node, name, change.resync);
        if (!node) this.phases.forget(name);
        // This replica's own agents are followed from their reports, which the cache lags.
        else if (!source.holdsStream(name)) this.phases.report(name, node.status, false);
      }
    });
  }

  /**
   * The seam for phases that no agent reports: the leader's drain (done in parallel with the
   * agent's update) calls this with the drain's duration when it ends.
   */
  observePhase(phase: string, seconds: number): void {
    this.#phaseDuration.observe({ phase }, seconds);
  }

  /** The TLS material this replica serves gRPC (and the bootstrap endpoint) with. */
  servesWith(material: { ca: Buffer; cert: Buffer }): void {
    this.#certificates = servedCertificates(material, this.replicaName);
  }

  observeRender(seconds: number, ok: boolean): void {
    const result = ok ? 'ok' : 'failed';
    this.#renderDuration.observe({ result }, seconds);
    this.#renders.inc({ result });
  }

  /** The store with its commit and list timed. */
  instrument(store: Store): Store {
    const timed = <T>(operation: string, work: () => Promise<T>): Promise<T> => {
      const end = this.#storeDuration.startTimer({ backend: store.backend, operation });
      return work().finally(() => end());
    };
    return {
      get backend() { return store.backend; },
      get: (kind, name) => store.get(kind, name),
      list: (kinds) => timed('list', () => store.list(kinds)),
      commit: (ops) => timed('commit', () => store.commit(ops)),
      watch: (after, handlers) => store.watch(after, handlers),
      grantLease: (ttlMs) => store.grantLease(ttlMs),
      close: () => store.close(),
    };
  }

  #fleetGauges(): void {
    const registers = [this.registry];
    const perPool = (name: string, help: string, value: (pool: string) => number | undefined): void => {
      const gauge: Gauge<'pool'> = new Gauge({
        name, help, labelNames: ['pool'], registers,
        collect: () => {
          gauge.reset();
          const cache = this.#source?.cache;
          if (!cache) return;
          for (const pool of cache.pools.keys()) {
            const v = value(pool);
            if (v !== undefined) gauge.set({ pool }, v);
          }
        },
      });
    };
    const status = (pool: string) => this.#source?.cache.poolStatuses.get(pool)?.value.status;
    perPool('mco_machine_count', 'Nodes in the pool (MCO\'s name; status.machineCount)', (p) => status(p)?.machineCount ?? 0);
    perPool('mco_updated_machine_count', 'Nodes on the pool\'s target config and Done (MCO\'s name; status.updatedMachineCount)', (p) => status(p)?.updatedMachineCount ?? 0);
    perPool('mco_degraded_machine_count', 'Nodes Degraded or Unreconcilable (MCO\'s name; status.degradedMachineCount)', (p) => status(p)?.degradedMachineCount ?? 0);
    perPool('mco_unavailable_machine_count', 'Nodes updating, degraded or disconnected (MCO\'s name; status.unavailableMachineCount)', (p) => status(p)?.unavailableMachineCount ?? 0);
    perPool('mcplane_ready_machine_count', 'Nodes updated and available (status.readyMachineCount)', (p) => status(p)?.readyMachineCount ?? 0);
    perPool('mcplane_pool_rollout_progress_ratio', 'Updated nodes / nodes in the pool (1 when the pool is empty)', (p) => {
      const s = status(p);
      return s && s.machineCount > 0 ? s.updatedMachineCount / s.machineCount : 1;
    });
    perPool('mcplane_pool_rollout_eta_seconds', 'Estimated seconds until every node of the pool is updated: mean of recent assigned->Done times x ceil(remaining nodes / maxUnavailable). Absent when nothing is rolling out (or paused) or no update has been timed yet', (p) => {
      const pool = this.#source?.cache.pools.get(p)?.value;
      return pool ? this.eta.etaSeconds(pool, status(p)) : undefined;
    });
    perPool('mcplane_pool_degraded', '1 when the pool\'s Degraded condition is True (a node degraded or the render failed)', (p) => (status(p)?.conditions.find((c) => c.type === 'Degraded')?.status === 'True' ? 1 : 0));
    perPool('mcplane_pool_render_degraded', '1 when the pool\'s latest render failed (RenderDegraded); the pool keeps its last good config', (p) => ((this.#source?.cache.poolStatuses.get(p)?.value.renderProblems.length ?? 0) > 0 ? 1 : 0));
    perPool('mcplane_pool_paused', '1 when the pool is paused', (p) => (this.#source?.cache.pools.get(p)?.value.spec.paused ? 1 : 0));
    perPool('mcplane_agents_connected', 'Nodes of the pool whose agent holds a live session on some replica', (p) => this.#nodesOf(p).filter((n) => n.connected).length);
    perPool('mcplane_nodes_drifted', 'Nodes of the pool whose agent reports drift (files or units changed behind its back)', (p) => this.#nodesOf(p).filter((n) => n.status.drift.length > 0).length);

    const nodes: Gauge<'pool' | 'state'> = new Gauge({
      name: 'mcplane_nodes', help: `Nodes by pool and the state their agent reports (${NODE_STATES.join(', ')})`,
      labelNames: ['pool', 'state'], registers,
      collect: () => {
        nodes.reset();
        const cache = this.#source?.cache;
        if (!cache) return;
        const counts = new Map<string, number>();
        for (const pool of cache.pools.keys()) for (const state of NODE_STATES) counts.set(`${pool}\0${state}`, 0);
        for (const n of cache.nodes.values()) {
          if (!n.pool) continue;
          const key = `${n.pool}\0${n.status.state}`;
          counts.set(key, (counts.get(key) ?? 0) + 1);
        }
        for (const [key, v] of counts) {
          const [pool, state] = key.split('\0') as [string, string];
          nodes.set({ pool, state }, v);
        }
      },
    });
    const inPhase: Gauge<'node' | 'pool' | 'phase'> = new Gauge({
      name: 'mcplane_node_phase_seconds',
      help: 'Seconds each Working node has been in its current phase (as this replica saw it begin); only Working nodes have a series',
      labelNames: ['node', 'pool', 'phase'], registers,
      collect: () => {
        inPhase.reset();
        const cache = this.#source?.cache;
        if (!cache) return;
        const now = Date.now();
        for (const n of cache.nodes.values()) {
          if (n.status.state !== 'Working') continue;
          const since = this.phases.since(n.name);
          if (since !== undefined) inPhase.set({ node: n.name, pool: n.pool, phase: phaseLabel(n.status.phase) }, Math.max(0, now - since) / 1000);
        }
      },
    });
    const nodesWithoutPool: Gauge = new Gauge({
      name: 'mcplane_nodes_without_pool', help: 'Registered nodes no pool selects (or two custom pools do)', registers,
      collect: () => {
        const cache = this.#source?.cache;
        nodesWithoutPool.set(cache ? [...cache.nodes.values()].filter((n) => !n.pool).length : 0);
      },
    });
    const leader: Gauge = new Gauge({
      name: 'mcplane_leader', help: '1 on the replica that leads (renders, rolls out, writes pool status), 0 on the others', registers,
      collect: () => { leader.set(this.#source?.leading() ? 1 : 0); },
    });
    // Seconds left, not the notAfter time, so that an alert compares with a duration and a
    // dashboard shows "days left" without arithmetic. Nodes come from their stored records (the
    // certificate each presented when it last registered), so every replica exports all of them.
    const expiry: Gauge<'kind' | 'name'> = new Gauge({
      name: 'mcplane_certificate_expiry_seconds',
      help: 'Seconds until the certificate expires (its notAfter; negative once it has): kind ca (each CA in this replica\'s bundle, name = subject CN), server (the certificate this replica serves with, name = replica), node (the certificate the node\'s agent registered with, name = node)',
      labelNames: ['kind', 'name'], registers,
      collect: () => {
        expiry.reset();
        const now = Date.now();
        const set = (kind: string, name: string, notAfter: number): void => {
          expiry.set({ kind, name }, (notAfter - now) / 1000);
        };
        // Two CAs of one name (the old and the new during a rotation): the one expiring first
        // counts, as certificates it signed stop working with it.
        const soonest = new Map<string, ServedCertificate>();
        for (const c of this.#certificates) {
          const key = `${c.kind}\0${c.name}`;
          if (!soonest.has(key) || soonest.get(key)!.notAfter > c.notAfter) soonest.set(key, c);
        }
        for (const c of soonest.values()) set(c.kind, c.name, c.notAfter);
        for (const [name, record] of this.#source?.cache.nodeRecords ?? []) {
          const notAfter = record.value.certificate?.notAfter;
          if (notAfter !== undefined) set('node', name, notAfter);
        }
      },
    });
    const replicas: Gauge = new Gauge({
      name: 'mcplane_replicas', help: 'Replicas alive (holding a store lease), as this replica sees them', registers,
      collect: () => { replicas.set(this.#source?.cache.replicas.size ?? 0); },
    });
  }

  #nodesOf(pool: string) {
    return this.#source?.cache.nodesInPool(pool) ?? [];
  }
}
