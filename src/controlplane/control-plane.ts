// One replica of the control plane without its transports: the cache fed by the store's watch,
// the replica's lease and the election, the controllers (leader-only ones run only while this
// replica leads), the agent sessions it holds and the dispatcher that sends to them: the wiring.
// Agents' streams enter through its `agents` (sessions/agent-entry.ts); the operator's commands
// (api/config-commands.ts) are built beside it by server.ts, over its cache.
//
// Every write goes to the store and comes back through the watch; reads come from the cache.
// With SQLite the store is in this process and this replica is the only one, with the same code.

import { ConfigurationError, ConflictError, defaultPools } from '../machineconfig/index.ts';
import { EventEmitter } from 'node:events';
import type { Logger } from '../runtime/logger.ts';
import { AgentSessions } from './sessions/agent-sessions.ts';
import { AssignmentDispatcher } from './sessions/assignment-dispatcher.ts';
import { AgentEntry } from './sessions/agent-entry.ts';
import { systemClock, type Clock } from './replica/clock.ts';
import { ClusterCache } from './cache/cluster-cache.ts';
import { ControllerManager } from './controllers/controller-manager.ts';
import { createControllers } from './controllers/index.ts';
import { EventRecorder } from './controllers/event-recorder.ts';
import { LeaderElection } from './replica/leader-election.ts';
import { LeaderWriter } from './replica/leader-writer.ts';
import { ServerMetrics } from './metrics/server-metrics.ts';
import { Replica } from './replica/replica.ts';
import type { Store } from './store/store.ts';
import type { KubernetesAccess } from './kubernetes/kube-client.ts';
import { NodeOperations } from './kubernetes/node-operations.ts';
import { KubernetesNodeSync } from './kubernetes/kubernetes-node-sync.ts';
import { DEFAULT_DRAIN_SETTINGS, DrainController, type DrainSettings } from './controllers/drain-controller.ts';
import type { DrainAccess } from './controllers/drain-gate.ts';
import { observeDrains } from './drain-observers.ts';
import { EventRecorder as KubernetesEventRecorder } from './kubernetes/event-recorder.ts';
import { KubernetesSourceController } from './controllers/kubernetes-source-controller.ts';

/** The replica that serves the API, as the status API shows it (handed out by server.ts). */
export interface ServingReplica {
  readonly name: string;
  /** The gRPC address it advertises (the bootstrap endpoint lists the others'). */
  readonly address: string;
  readonly leading: boolean;
  /** Agent streams this replica holds now. */
  readonly agentsConnected: number;
  /** Unread Watch events a stream may leave beyond its initial list before it is cut. */
  readonly watchBacklog: number;
  /** 'shutdown' when the replica stops: open Watch streams end with a status saying so. */
  readonly lifecycle: EventEmitter<{ shutdown: [] }>;
}

export interface ControlPlaneOptions {
  replicaName: string;
  /** The gRPC address this replica advertises. */
  address: string;
  /** The replica's lease: a leader that dies is replaced after at most this long. */
  leaseTtlMs?: number;
  heartbeatMs?: number;
  /** How often the leader deletes expired enrollment tokens (default 10 min). */
  tokenSweepMs?: number;
  /** The time decisions read (windows, soaks, drain deadlines); tests pass a ManualClock. */
  clock?: Clock;
  /** The Kubernetes cluster this control plane works with (--kubeconfig or in-cluster); absent: none. */
  kubernetes?: KubernetesAccess;
  /** Drain retry and poll timing (tests shorten it). */
  drain?: Partial<DrainSettings>;
  /** --kubernetes-source: MachineConfigs and pools come from the cluster (needs `kubernetes`). */
  kubernetesSource?: boolean;
  /** Unread Watch events allowed beyond a stream's initial list before it is cut (default 1,024). */
  watchBacklog?: number;
}

export class ControlPlane {
  /** 'shutdown': the server is about to stop; long-lived calls end with a status that says so. */
  readonly lifecycle = new EventEmitter<{ shutdown: [] }>().setMaxListeners(0);
  readonly sessions: AgentSessions;
  readonly dispatcher: AssignmentDispatcher;
  /** Where agents' streams enter: register, report, renew, disconnect. */
  readonly agents: AgentEntry;
  readonly election: LeaderElection;
  /** The cluster's API (drain, node annotations, MachineConfig source), when one is configured. */
  readonly kubernetes: KubernetesAccess | undefined;
  readonly #controllers: ControllerManager;
  /** Events (kubectl get events); other leader-only controllers record theirs through it. */
  readonly events: EventRecorder;
  readonly #nodeSync: KubernetesNodeSync | undefined;
  /** The leader's drains; `drains.onEvent` is the seam for events, metrics and history. */
  readonly drains: DrainController;
  readonly clock: Clock;
  /** Unread Watch events allowed beyond a stream's initial list before it is cut. */
  readonly watchBacklog: number;
  /** This replica as the status API shows it, read live. */
  readonly serving: ServingReplica;
  /** With --kubernetes-source, the controller that takes MachineConfigs and pools from the cluster. */
  readonly #source: KubernetesSourceController | undefined;

  readonly cache: ClusterCache;
  readonly replica: Replica;
  readonly metrics: ServerMetrics;
  private constructor(cache: ClusterCache, replica: Replica, options: ControlPlaneOptions, log: Logger, metrics: ServerMetrics) {
    this.cache = cache;
    this.replica = replica;
    this.metrics = metrics;
    this.watchBacklog = options.watchBacklog ?? 1024;
    this.clock = options.clock ?? systemClock;
    const cp = this;
    this.serving = {
      name: replica.name,
      address: replica.options.address,
      get leading() { return cp.leading; },
      get agentsConnected() { return cp.sessions.size; },
      watchBacklog: this.watchBacklog,
      lifecycle: this.lifecycle,
    };
    this.kubernetes = options.kubernetes;
    this.election = new LeaderElection(cache, replica, log);
    this.sessions = new AgentSessions(cache, replica, log);
    this.dispatcher = new AssignmentDispatcher(cache, this.sessions, log);
    this.agents = new AgentEntry(cache, this.sessions, this.dispatcher, metrics.phases, log);
    const writer = new LeaderWriter(cache, this.election);
    this.events = new EventRecorder(cache, writer, log);
    // With a cluster: its Nodes are synced into the store while this replica leads, and drains
    // and MCO's node annotations run on the leader.
    const nodeOps = options.kubernetes ? new NodeOperations(options.kubernetes) : undefined;
    const nodeSync = nodeOps ? new KubernetesNodeSync(cache, writer, nodeOps, log, () => this.#controllers.resyncAll()) : undefined;
    this.#nodeSync = nodeSync;
    const drainAccess: DrainAccess = { enabled: nodeOps !== undefined, get nodesSynced() { return nodeSync?.synced ?? false; } };
    if (options.kubernetesSource) {
      if (!options.kubernetes) throw new ConfigurationError('--kubernetes-source needs a cluster: give --kubeconfig FILE (or run in a pod with a service account)');
      this.#source = new KubernetesSourceController(cache, writer, options.kubernetes, log);
      const source = this.#source;
      this.election.on('leading', (leading) => source.setLeading(leading));
    }

    this.drains = new DrainController(cache, writer, this.clock, log, nodeOps && nodeSync ? { ops: nodeOps, sync: nodeSync, events: new KubernetesEventRecorder(nodeOps.access, log) } : undefined, { ...DEFAULT_DRAIN_SETTINGS, ...options.drain });
    observeDrains(this.drains, { events: this.events, metrics, history: this.sessions.history, cache, log });
    this.#controllers = new ControllerManager(createControllers({
      cache, writer, clock: this.clock, log, metrics, drainAccess, drains: this.drains, events: this.events, source: this.#source,
      kubernetes: nodeOps && nodeSync ? { ops: nodeOps, sync: nodeSync } : undefined, tokenSweepMs: options.tokenSweepMs ?? 600_000,
    }), cache, log);
    this.election.on('leading', (leading) => {
      this.#controllers.setLeading(leading);
      nodeSync?.setLeading(leading);
    });
    // A session this replica is opening shows in the cache before the stream is recorded here.
    metrics.bind({ cache, leading: () => this.leading, holdsStream: (node) => this.sessions.get(node) !== undefined || cache.sessions.get(node)?.value.replica === replica.name });
  }

  static async start(store: Store, options: ControlPlaneOptions, log: Logger): Promise<ControlPlane> {
    // Every metric lives here, served or not: --metrics-listen only decides whether it is exposed.
    const metrics = new ServerMetrics(options.replicaName);
    const cache = await ClusterCache.start(metrics.instrument(store), log);
    let cp: ControlPlane | undefined;
    const replica = new Replica(store, cache, {
      name: options.replicaName,
      address: options.address,
      leaseTtlMs: options.leaseTtlMs ?? 5000,
      heartbeatMs: options.heartbeatMs ?? 5000,
      agents: () => cp?.sessions.size ?? 0,
    }, log);
    cp = new ControlPlane(cache, replica, options, log, metrics);
    try {
      await cp.#createDefaultPools();
      await replica.start();
      cp.election.start();
      // Ready means a leader exists (this replica, or another): a lone server answers its first
      // calls with its pools rendered, as it did before replicas.
      await cp.#waitForLeader(options.leaseTtlMs ?? 5000);
      await cp.#controllers.settle();
    } catch (err) {
      await cp.stop();
      throw err;
    }
    return cp;
  }

  get store(): Store {
    return this.cache.store;
  }

  get leading(): boolean {
    return this.election.leading;
  }

  /** Runs every controller again: a test moved the clock, so time-driven work may be due. */
  resync(): void {
    this.#controllers.resyncAll();
  }

  /** Ends this replica's part: streams closed, leadership and lease given up, watch stopped. */
  async stop(): Promise<void> {
    this.#source?.setLeading(false);
    await this.#controllers.stop();
    await this.#nodeSync?.stop();
    this.sessions.closeAll();
    await this.sessions.writer.flush();
    await this.sessions.history.idle();
    await this.election.resign();
    await this.replica.stop();
    this.cache.stop();
  }

  async #waitForLeader(timeoutMs: number): Promise<void> {
    const settled = (): boolean => this.leading || (this.cache.leader !== undefined && this.cache.leader.value.replica !== this.replica.name);
    if (settled()) return;
    await new Promise<void>((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        this.cache.off('change', check);
        this.election.off('leading', check);
        resolve();
      };
      const check = (): void => {
        if (settled()) finish();
      };
      // Another replica may hold leadership on a lease that has yet to expire: start anyway.
      const timer = setTimeout(finish, timeoutMs * 2);
      this.cache.on('change', check);
      this.election.on('leading', check);
    });
  }

  async #createDefaultPools(): Promise<void> {
    const missing = defaultPools().filter((p) => !this.cache.pools.has(p.metadata.name));
    for (const pool of missing) {
      // Another replica starting at the same moment may create it first; that is fine.
      await this.store.commit([{ type: 'put', kind: 'MachineConfigPool', name: pool.metadata.name, value: pool, expectedVersion: null }])
        .catch((err: unknown) => { if (!(err instanceof ConflictError)) throw err; });
    }
  }

}
