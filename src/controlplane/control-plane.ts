// One replica of the control plane without its transports: the cache fed by the store's watch,
// the replica's lease and the election, the controllers (leader-only ones run only while this
// replica leads), the agent sessions it holds and the dispatcher that sends to them. The gRPC
// services and the bootstrap endpoint are thin layers over this class.
//
// Every write goes to the store and comes back through the watch; reads come from the cache.
// With SQLite the store is in this process and this replica is the only one, with the same code.

import {
  canonicalJson,
  ConflictError,
  configsForPool,
  defaultPools,
  InvalidDocumentError,
  labelProblem,
  MASTER_POOL,
  NodeNotConnectedError,
  NotFoundError,
  parseDocuments,
  PermissionDeniedError,
  readDocuments,
  StoreLimitError,
  StoreUnavailableError,
  WORKER_POOL,
  type MachineConfig,
  type MachineConfigPool,
  type NodeState,
  type NodeStatus,
  type Problem,
} from '../machineconfig/index.ts';
import { EventEmitter } from 'node:events';
import type { Logger } from '../runtime/logger.ts';
import { AgentSessions, type AgentStream, type LocalSession } from './agent-sessions.ts';
import { AssignmentDispatcher } from './assignment-dispatcher.ts';
import { systemClock, type Clock } from './clock.ts';
import { ClusterCache } from './cluster-cache.ts';
import { ControllerManager } from './controller-manager.ts';
import { EnrollmentTokenCollector } from './enrollment-token-collector.ts';
import { LeaderElection } from './leader-election.ts';
import { LeaderWriter } from './leader-writer.ts';
import { poolFor, PoolMembershipController } from './pool-membership-controller.ts';
import { PoolStatusController } from './pool-status-controller.ts';
import { RenderController } from './render-controller.ts';
import { Replica } from './replica.ts';
import { RolloutController } from './rollout-controller.ts';
import type { Store, WriteOp } from './store/store.ts';
import type { PoolResumeRecord, ReapplyRequestRecord } from './stored-records.ts';

export interface AppliedObject {
  kind: string;
  name: string;
  action: 'created' | 'configured' | 'unchanged';
}

export interface NodeRegistration {
  nodeName: string;
  labels: Record<string, string>;
  /** The pool the node's credential binds it to; absent in plaintext development mode. */
  boundPool?: string;
  bootId: string;
  agentVersion: string;
  status: NodeStatus;
}

export interface ControlPlaneOptions {
  replicaName: string;
  /** The gRPC address this replica advertises. */
  address: string;
  /** The replica's lease: a leader that dies is replaced after at most this long. */
  leaseTtlMs?: number;
  heartbeatMs?: number;
  /** How long Apply waits for the leader to render what it stored. */
  renderWaitMs?: number;
  /** How often the leader deletes expired enrollment tokens (default 10 min). */
  tokenSweepMs?: number;
  /** The time decisions read (windows, soaks, drain deadlines); tests pass a ManualClock. */
  clock?: Clock;
}

const NODE_STATES: readonly NodeState[] = ['Done', 'Working', 'Degraded', 'Unreconcilable', 'RolledBack'];

export class ControlPlane {
  /** 'shutdown': the server is about to stop; long-lived calls end with a status that says so. */
  readonly lifecycle = new EventEmitter<{ shutdown: [] }>().setMaxListeners(0);
  readonly sessions: AgentSessions;
  readonly dispatcher: AssignmentDispatcher;
  readonly election: LeaderElection;
  readonly #controllers: ControllerManager;
  readonly #renderWaitMs: number;
  readonly clock: Clock;

  private constructor(readonly cache: ClusterCache, readonly replica: Replica, options: ControlPlaneOptions, private readonly log: Logger) {
    this.#renderWaitMs = options.renderWaitMs ?? 15_000;
    this.clock = options.clock ?? systemClock;
    this.election = new LeaderElection(cache, replica, log);
    this.sessions = new AgentSessions(cache, replica, log);
    this.dispatcher = new AssignmentDispatcher(cache, this.sessions, log);
    const writer = new LeaderWriter(cache, this.election);
    this.#controllers = new ControllerManager([
      new RenderController(cache, writer, log),
      new PoolMembershipController(cache, writer, log),
      new RolloutController(cache, writer, this.clock, log),
      new PoolStatusController(cache, writer, this.clock),
      new EnrollmentTokenCollector(cache, writer, options.tokenSweepMs ?? 600_000, log),
    ], cache, log);
    this.election.on('leading', (leading) => this.#controllers.setLeading(leading));
  }

  static async start(store: Store, options: ControlPlaneOptions, log: Logger): Promise<ControlPlane> {
    const cache = await ClusterCache.start(store, log);
    let cp: ControlPlane | undefined;
    const replica = new Replica(store, cache, {
      name: options.replicaName,
      address: options.address,
      leaseTtlMs: options.leaseTtlMs ?? 5000,
      heartbeatMs: options.heartbeatMs ?? 5000,
      agents: () => cp?.sessions.size ?? 0,
    }, log);
    cp = new ControlPlane(cache, replica, options, log);
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
    await this.#controllers.stop();
    this.sessions.closeAll();
    await this.sessions.writer.flush();
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

  // ---- configuration ---------------------------------------------------------------------------

  /**
   * Validates every document first; stores all of them or none, in one commit. Answers once the
   * commit is durable and the leader has rendered the pools it touched (seen through the watch).
   */
  async apply(manifests: { source: string; text: string }[], dryRun = false): Promise<AppliedObject[]> {
    const problems: Problem[] = [];
    const documents = manifests.flatMap(({ source, text }) => {
      const read = readDocuments(text, source);
      problems.push(...read.problems);
      return read.documents;
    });
    const parsed = parseDocuments(documents);
    problems.push(...parsed.problems);
    if (problems.length) throw new InvalidDocumentError(problems);
    if (documents.length === 0) {
      throw new InvalidDocumentError([{ object: 'request', field: 'manifests', rule: 'required', message: 'no documents to apply' }]);
    }

    const ops: WriteOp[] = [];
    const results: AppliedObject[] = [];
    const touchedConfigs: MachineConfig[] = [];
    const touchedPools = new Set<string>();
    for (const mc of parsed.configs) {
      const existing = this.cache.configs.get(mc.metadata.name);
      const action = !existing ? 'created' : canonicalJson(existing.value) === canonicalJson(mc) ? 'unchanged' : 'configured';
      results.push({ kind: 'MachineConfig', name: mc.metadata.name, action });
      if (action === 'unchanged') continue;
      ops.push({ type: 'put', kind: 'MachineConfig', name: mc.metadata.name, value: mc, expectedVersion: existing?.resourceVersion ?? null, ...(existing ? { createdAt: existing.createdAt } : {}) });
      touchedConfigs.push(mc, ...(existing ? [existing.value] : []));
    }
    for (const pool of parsed.pools) {
      const existing = this.cache.pools.get(pool.metadata.name);
      const action = !existing ? 'created' : canonicalJson(existing.value) === canonicalJson(pool) ? 'unchanged' : 'configured';
      results.push({ kind: 'MachineConfigPool', name: pool.metadata.name, action });
      if (action === 'unchanged') continue;
      ops.push({ type: 'put', kind: 'MachineConfigPool', name: pool.metadata.name, value: pool, expectedVersion: existing?.resourceVersion ?? null, ...(existing ? { createdAt: existing.createdAt } : {}) });
      touchedPools.add(pool.metadata.name);
    }
    for (const mcfg of parsed.machineConfigurations) {
      // Nothing renders from it: the dispatchers re-send every assignment with the new policy.
      const existing = this.cache.machineConfiguration;
      const action = !existing ? 'created' : canonicalJson(existing.value) === canonicalJson(mcfg) ? 'unchanged' : 'configured';
      results.push({ kind: 'MachineConfiguration', name: mcfg.metadata.name, action });
      if (action === 'unchanged') continue;
      ops.push({ type: 'put', kind: 'MachineConfiguration', name: mcfg.metadata.name, value: mcfg, expectedVersion: existing?.resourceVersion ?? null, ...(existing ? { createdAt: existing.createdAt } : {}) });
    }
    if (dryRun || ops.length === 0) return results;
    const { revision } = await this.store.commit(ops).catch((err: unknown) => {
      // All or nothing means one transaction, and a transaction has etcd's limits.
      if (err instanceof StoreLimitError) {
        throw new InvalidDocumentError([{ object: 'request', field: 'manifests', rule: 'apply-size', message: `an Apply is stored in one transaction, so all its objects together must fit in one: ${err.message}. Apply them in several smaller requests` }]);
      }
      throw err;
    });
    this.log.info({ objects: results.filter((r) => r.action !== 'unchanged') }, 'applied');
    for (const name of this.#poolsSelecting(touchedConfigs, parsed.pools)) touchedPools.add(name);
    await this.#waitForRender(touchedPools, revision);
    return results;
  }

  async delete(kind: string, name: string): Promise<void> {
    let touchedPools = new Set<string>();
    let revision: number;
    if (kind === 'MachineConfig') {
      const existing = this.cache.configs.get(name);
      if (!existing) throw new NotFoundError(kind, name);
      ({ revision } = await this.store.commit([{ type: 'delete', kind, name, expectedVersion: existing.resourceVersion }]));
      touchedPools = this.#poolsSelecting([existing.value], []);
    } else if (kind === 'MachineConfigPool') {
      if (name === MASTER_POOL || name === WORKER_POOL) {
        throw new PermissionDeniedError(`MachineConfigPool/${name} is built in and cannot be deleted (MCO recreates it too); pause it instead`);
      }
      const existing = this.cache.pools.get(name);
      if (!existing) throw new NotFoundError(kind, name);
      ({ revision } = await this.store.commit([{ type: 'delete', kind, name, expectedVersion: existing.resourceVersion }]));
    } else if (kind === 'MachineConfiguration') {
      // Without it, each pool's nodes follow their pool's own policy (or MCO's default: reboot).
      const existing = this.cache.machineConfiguration;
      if (!existing || existing.name !== name) throw new NotFoundError(kind, name);
      ({ revision } = await this.store.commit([{ type: 'delete', kind, name, expectedVersion: existing.resourceVersion }]));
    } else if (kind === 'Node') {
      const node = this.cache.nodes.get(name);
      if (!node) throw new NotFoundError(kind, name);
      if (node.connected) throw new PermissionDeniedError(`Node/${name} is connected; stop its agent (or retire the host) before deleting it`);
      ({ revision } = await this.store.commit([
        // Refused if the agent connected since the check above.
        { type: 'check', kind: 'AgentSession', name, expectedVersion: null },
        ...(['Node', 'NodeAssignment', 'NodeStatus', 'ReapplyRequest'] as const).map((k) => ({ type: 'delete' as const, kind: k, name })),
      ]));
    } else {
      throw new InvalidDocumentError([{ object: `${kind}/${name}`, field: 'kind', rule: 'unknown-kind', message: `cannot delete kind "${kind}": use MachineConfig, MachineConfigPool, MachineConfiguration or Node` }]);
    }
    await this.cache.waitForRevision(revision);
    await this.#waitForRender(touchedPools, revision);
    this.log.info({ kind, name }, 'deleted');
  }

  async setPoolPaused(name: string, paused: boolean): Promise<void> {
    const existing = this.cache.pools.get(name);
    if (!existing) throw new NotFoundError('MachineConfigPool', name);
    if (!paused) await this.#resumeHaltedRollout(name);
    if (existing.value.spec.paused === paused) return;
    const pool: MachineConfigPool = structuredClone(existing.value);
    pool.spec.paused = paused;
    const { revision } = await this.store.commit([{ type: 'put', kind: 'MachineConfigPool', name, value: pool, expectedVersion: existing.resourceVersion, createdAt: existing.createdAt }]);
    this.log.info({ pool: name, paused }, paused ? 'pool paused' : 'pool resumed');
    await this.#waitForRender(new Set([name]), revision);
  }

  /**
   * `mcctl resume pool` past the circuit breaker: the halt is the leader's record, so the resume
   * is a request it acts on (and deletes). Answers once the leader has cleared the halt.
   */
  async #resumeHaltedRollout(name: string): Promise<void> {
    const record = this.cache.poolStatuses.get(name);
    const halt = record?.value.rollout?.halt;
    if (!record || !halt || halt.target !== record.value.target) return;
    const value: PoolResumeRecord = { target: halt.target, requestedAt: this.clock.now() };
    const { revision } = await this.store.commit([{ type: 'put', kind: 'PoolResume', name, value }]);
    this.log.info({ pool: name, target: halt.target }, 'resume past a rollout halt requested');
    await this.cache.waitForRevision(revision);
    await this.#waitFor(() => this.cache.poolStatuses.get(name)?.value.rollout?.halt?.target !== halt.target, `the leader to clear the rollout halt of pool ${name}`);
  }

  /** Resolves once `done()` holds, or fails after the render wait naming what it waited for. */
  async #waitFor(done: () => boolean, what: string): Promise<void> {
    if (done()) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.cache.off('change', check);
        reject(new StoreUnavailableError(`stored, but timed out after ${this.#renderWaitMs} ms waiting for ${what}; the leader does it when it can`));
      }, this.#renderWaitMs);
      const check = (): void => {
        if (!done()) return;
        clearTimeout(timer);
        this.cache.off('change', check);
        resolve();
      };
      this.cache.on('change', check);
    });
  }

  /** Stores a re-apply request; the replica holding the node's stream delivers it. */
  async reapplyNode(name: string, requestedBy: string): Promise<void> {
    const node = this.cache.nodes.get(name);
    if (!node) throw new NotFoundError('Node', name);
    const session = this.cache.sessions.get(name);
    if (!session) {
      throw new NodeNotConnectedError(`Node/${name} is not connected; the re-apply cannot be delivered (it gets its assignment again when it reconnects)`);
    }
    const value: ReapplyRequestRecord = { requestedBy, requestedAt: Date.now() };
    const { revision } = await this.store.commit([
      { type: 'check', kind: 'AgentSession', name, expectedVersion: session.resourceVersion },
      { type: 'put', kind: 'ReapplyRequest', name, value },
    ]).catch((err: unknown) => {
      if (err instanceof ConflictError) throw new NodeNotConnectedError(`Node/${name} disconnected while the re-apply was being requested; try again when it is back`);
      throw err;
    });
    await this.cache.waitForRevision(revision);
    this.log.info({ node: name, requestedBy, replica: session.value.replica }, 'forced re-apply requested');
  }

  /**
   * An operator sets or removes a node's labels: the one way a registered node changes role or
   * zone. The labels the agent asked for and did not get are forgotten with it.
   */
  async labelNode(name: string, set: Record<string, string>, remove: string[], requestedBy: string): Promise<void> {
    const problems: Problem[] = [];
    for (const [k, v] of Object.entries(set)) {
      const problem = labelProblem(k, v);
      if (problem) problems.push({ object: `Node/${name}`, field: `labels.${k}`, rule: 'label-syntax', message: problem });
    }
    for (const k of remove) {
      const problem = labelProblem(k, '');
      if (problem) problems.push({ object: `Node/${name}`, field: `labels.${k}`, rule: 'label-syntax', message: problem });
      if (k in set) problems.push({ object: `Node/${name}`, field: `labels.${k}`, rule: 'label-conflict', message: `label ${JSON.stringify(k)} is both set and removed` });
    }
    if (problems.length) throw new InvalidDocumentError(problems);
    const record = this.cache.nodeRecords.get(name);
    if (!record) throw new NotFoundError('Node', name);
    const labels = { ...record.value.labels, ...set };
    for (const k of remove) delete labels[k];
    const { ignoredLabels: _forgotten, ...rest } = record.value;
    const { revision } = await this.store.commit([{ type: 'put', kind: 'Node', name, value: { ...rest, labels }, expectedVersion: record.resourceVersion, createdAt: record.createdAt }]);
    await this.cache.waitForRevision(revision);
    this.log.info({ node: name, set, remove, requestedBy }, 'node labels changed');
  }

  /** Pools whose rendered config may change with these configs (or that are these pools). */
  #poolsSelecting(configs: readonly MachineConfig[], pools: readonly MachineConfigPool[]): Set<string> {
    const names = new Set(pools.map((p) => p.metadata.name));
    if (configs.length === 0) return names;
    for (const [name, stored] of this.cache.pools) {
      if (configsForPool(stored.value, configs).length > 0) names.add(name);
    }
    return names;
  }

  /** Resolves once the leader has rendered each pool from a store revision at or after `revision`. */
  async #waitForRender(pools: Set<string>, revision: number): Promise<void> {
    await this.cache.waitForRevision(revision);
    const pending = (): string[] => [...pools].filter((p) => this.cache.pools.has(p) && (this.cache.poolStatuses.get(p)?.value.renderedRevision ?? 0) < revision);
    if (pending().length === 0) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.cache.off('change', check);
        const leader = this.cache.leader?.value.replica;
        reject(new StoreUnavailableError(`stored, but pool${pending().length === 1 ? '' : 's'} ${pending().join(', ')} ${pending().length === 1 ? 'was' : 'were'} not rendered within ${this.#renderWaitMs} ms (${leader ? `leader: ${leader}` : 'no replica leads right now'}); the leader renders ${pending().length === 1 ? 'it' : 'them'} when it can`));
      }, this.#renderWaitMs);
      const check = (): void => {
        if (pending().length > 0) return;
        clearTimeout(timer);
        this.cache.off('change', check);
        resolve();
      };
      this.cache.on('change', check);
    });
  }

  // ---- agents ----------------------------------------------------------------------------------

  async registerNode(reg: NodeRegistration, stream: AgentStream): Promise<LocalSession> {
    const status = sanitizeStatus(reg.status);
    const isNew = !this.cache.nodeRecords.has(reg.nodeName);
    const session = await this.sessions.open({ nodeName: reg.nodeName, labels: reg.labels, ...(reg.boundPool ? { boundPool: reg.boundPool } : {}), bootId: reg.bootId, status }, stream);
    // The leader decides the pool; the answer here is the same rule applied to what this
    // replica sees now, for the agent's log.
    const membership = poolFor(this.cache, reg.nodeName, this.cache.nodeRecords.get(reg.nodeName)?.value.labels ?? reg.labels);
    this.log.info({ node: reg.nodeName, pool: membership.pool || undefined, poolError: membership.poolError, bootId: reg.bootId, current: status.currentConfig || undefined, new: isNew }, 'node registered');
    stream.write({ registered: { pool: membership.pool } });
    this.dispatcher.sendAssignment(session, true);
    await this.dispatcher.deliverReapply(session);
    return session;
  }

  reportStatus(nodeName: string, status: NodeStatus): void {
    this.sessions.report(nodeName, sanitizeStatus(status));
  }

  async disconnect(nodeName: string, stream: AgentStream): Promise<void> {
    if (await this.sessions.close(nodeName, stream)) this.log.info({ node: nodeName }, 'node disconnected');
  }
}

/** Agents are trusted to say who they are (their certificate), not to send well-formed status. */
function sanitizeStatus(status: NodeStatus): NodeStatus {
  if (NODE_STATES.includes(status.state)) return status;
  return {
    ...status,
    state: 'Degraded',
    reason: `agent reported unknown state ${JSON.stringify(status.state)}${status.reason ? `: ${status.reason}` : ''}`,
  };
}
