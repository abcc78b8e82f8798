// The control plane without its transports: objects in, decisions and status out. The gRPC
// services and the bootstrap endpoint are thin layers over this class, and tests drive it
// through them over real sockets.

import {
  canonicalJson,
  defaultPools,
  InvalidDocumentError,
  MASTER_POOL,
  NodeNotConnectedError,
  NotFoundError,
  PermissionDeniedError,
  readDocuments,
  parseDocuments,
  WORKER_POOL,
  type MachineConfigPool,
  type NodeState,
  type NodeStatus,
  type Problem,
} from '../machineconfig/index.ts';
import { AgentSessions, type AgentStream } from './agent-sessions.ts';
import { ClusterState, type NodeEntry, type PoolRecord } from './cluster-state.ts';
import type { Logger } from '../runtime/logger.ts';
import { PoolMembershipController } from './pool-membership-controller.ts';
import { PoolStatusTracker } from './pool-status-tracker.ts';
import { ReconcileLoop } from './reconcile-loop.ts';
import { RenderController } from './render-controller.ts';
import { RolloutController } from './rollout-controller.ts';
import type { Store, WriteOp } from './store/store.ts';
import { WatchHub } from './watch-hub.ts';

export interface AppliedObject {
  kind: string;
  name: string;
  action: 'created' | 'configured' | 'unchanged';
}

export interface NodeRegistration {
  nodeName: string;
  labels: Record<string, string>;
  bootId: string;
  agentVersion: string;
  status: NodeStatus;
}

const NODE_STATES: readonly NodeState[] = ['Done', 'Working', 'Degraded', 'Unreconcilable'];

export class ControlPlane {
  readonly sessions: AgentSessions;
  readonly hub = new WatchHub();
  readonly render: RenderController;
  readonly statuses: PoolStatusTracker;
  readonly #membership: PoolMembershipController;
  readonly #loop: ReconcileLoop;

  private constructor(readonly state: ClusterState, private readonly log: Logger) {
    this.sessions = new AgentSessions(state, log);
    this.render = new RenderController(state, log);
    this.#membership = new PoolMembershipController(state, log);
    const rollout = new RolloutController(state, this.sessions, log);
    this.statuses = new PoolStatusTracker(state, this.render);
    let renderNeeded = true;
    let membershipNeeded = true;
    state.on('change', (change) => {
      if (change.kinds.has('MachineConfig') || change.kinds.has('MachineConfigPool')) renderNeeded = true;
      if (change.kinds.has('MachineConfigPool')) membershipNeeded = true;
      for (const node of change.nodes) this.hub.publish({ type: 'MODIFIED', kind: 'node', name: node });
      this.#loop.schedule();
    });
    this.#loop = new ReconcileLoop([
      { name: 'render', run: async () => { if (renderNeeded) { renderNeeded = false; await this.render.reconcile(); } } },
      { name: 'membership', run: async () => { if (membershipNeeded) { membershipNeeded = false; await this.#membership.reconcile(); } } },
      { name: 'rollout', run: () => rollout.reconcile() },
      { name: 'status', run: () => { for (const name of this.statuses.refresh()) this.hub.publish({ type: 'MODIFIED', kind: 'pool', name }); } },
    ], log);
  }

  static async start(store: Store, log: Logger): Promise<ControlPlane> {
    const state = await ClusterState.load(store);
    const missing = defaultPools().filter((p) => !state.pools.has(p.metadata.name));
    if (missing.length) {
      await state.commit(missing.map((pool) => ({
        type: 'put', kind: 'MachineConfigPool', name: pool.metadata.name,
        value: { pool, target: '', targetSources: [] } satisfies PoolRecord, expectedVersion: null,
      })));
    }
    const cp = new ControlPlane(state, log);
    await cp.#loop.runNow();
    return cp;
  }

  /** Waits for pending reconciles (tests and shutdown). */
  async settle(): Promise<void> {
    await this.#loop.runNow();
  }

  async stop(): Promise<void> {
    await this.#loop.stop();
    this.sessions.closeAll();
    await this.state.flushNodes();
  }

  // ---- configuration ---------------------------------------------------------------------------

  /** Validates every document first; stores all of them or none. */
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
    for (const mc of parsed.configs) {
      const existing = this.state.configs.get(mc.metadata.name);
      const action = !existing ? 'created' : canonicalJson(existing.value) === canonicalJson(mc) ? 'unchanged' : 'configured';
      results.push({ kind: 'MachineConfig', name: mc.metadata.name, action });
      if (action !== 'unchanged') ops.push({ type: 'put', kind: 'MachineConfig', name: mc.metadata.name, value: mc, expectedVersion: existing?.resourceVersion ?? null });
    }
    for (const pool of parsed.pools) {
      const existing = this.state.pools.get(pool.metadata.name);
      const action = !existing ? 'created' : canonicalJson(existing.value.pool) === canonicalJson(pool) ? 'unchanged' : 'configured';
      results.push({ kind: 'MachineConfigPool', name: pool.metadata.name, action });
      if (action === 'unchanged') continue;
      const value: PoolRecord = { pool, target: existing?.value.target ?? '', targetSources: existing?.value.targetSources ?? [] };
      ops.push({ type: 'put', kind: 'MachineConfigPool', name: pool.metadata.name, value, expectedVersion: existing?.resourceVersion ?? null });
    }
    if (!dryRun && ops.length) {
      await this.state.commit(ops);
      this.log.info({ objects: results.filter((r) => r.action !== 'unchanged') }, 'applied');
    }
    return results;
  }

  async delete(kind: string, name: string): Promise<void> {
    if (kind === 'MachineConfig') {
      const existing = this.state.configs.get(name);
      if (!existing) throw new NotFoundError(kind, name);
      await this.state.commit([{ type: 'delete', kind, name, expectedVersion: existing.resourceVersion }]);
    } else if (kind === 'MachineConfigPool') {
      if (name === MASTER_POOL || name === WORKER_POOL) {
        throw new PermissionDeniedError(`MachineConfigPool/${name} is built in and cannot be deleted (MCO recreates it too); pause it instead`);
      }
      const existing = this.state.pools.get(name);
      if (!existing) throw new NotFoundError(kind, name);
      await this.state.commit([{ type: 'delete', kind, name, expectedVersion: existing.resourceVersion }]);
      this.hub.publish({ type: 'DELETED', kind: 'pool', name });
    } else if (kind === 'Node') {
      const node = this.state.nodes.get(name);
      if (!node) throw new NotFoundError(kind, name);
      if (node.connected) throw new PermissionDeniedError(`Node/${name} is connected; stop its agent (or retire the host) before deleting it`);
      await this.state.commit([{ type: 'delete', kind, name }]);
      this.hub.publish({ type: 'DELETED', kind: 'node', name });
    } else {
      throw new InvalidDocumentError([{ object: `${kind}/${name}`, field: 'kind', rule: 'unknown-kind', message: `cannot delete kind "${kind}": use MachineConfig, MachineConfigPool or Node` }]);
    }
    this.log.info({ kind, name }, 'deleted');
  }

  async setPoolPaused(name: string, paused: boolean): Promise<void> {
    const existing = this.state.pools.get(name);
    if (!existing) throw new NotFoundError('MachineConfigPool', name);
    if (existing.value.pool.spec.paused === paused) return;
    const pool: MachineConfigPool = structuredClone(existing.value.pool);
    pool.spec.paused = paused;
    await this.state.commit([{ type: 'put', kind: 'MachineConfigPool', name, value: { ...existing.value, pool }, expectedVersion: existing.resourceVersion }]);
    this.log.info({ pool: name, paused }, paused ? 'pool paused' : 'pool resumed');
  }

  reapplyNode(name: string, requestedBy: string): void {
    if (!this.state.nodes.has(name)) throw new NotFoundError('Node', name);
    if (!this.sessions.send(name, { command: { forceReapply: { requestedBy } } })) {
      throw new NodeNotConnectedError(`Node/${name} is not connected; the re-apply cannot be delivered (it gets its assignment again when it reconnects)`);
    }
    this.log.info({ node: name, requestedBy }, 'forced re-apply sent');
  }

  // ---- agents ----------------------------------------------------------------------------------

  async registerNode(reg: NodeRegistration, stream: AgentStream): Promise<NodeEntry> {
    const now = Date.now();
    const membership = this.#membership.poolFor(reg.nodeName, reg.labels);
    const status = sanitizeStatus(reg.status);
    const existing = this.state.nodes.get(reg.nodeName);
    const created: NodeEntry = {
      name: reg.nodeName,
      labels: reg.labels,
      pool: membership.pool,
      registeredAt: now,
      // A host bootstrapped from the Ignition endpoint already runs its pool's config.
      desiredConfig: status.currentConfig && this.state.rendered.has(status.currentConfig) ? status.currentConfig : '',
      status,
      lastSeen: now,
      connected: true,
      resourceVersion: '',
      ...(membership.poolError ? { poolError: membership.poolError } : {}),
    };
    await this.state.putNodes([{
      name: reg.nodeName,
      create: created,
      update: (n) => {
        n.labels = reg.labels;
        n.pool = membership.pool;
        if (membership.poolError) n.poolError = membership.poolError;
        else delete n.poolError;
        n.status = status;
        n.lastSeen = now;
        n.connected = true;
      },
    }]);
    this.sessions.attach(reg.nodeName, stream);
    const node = this.state.nodes.get(reg.nodeName)!;
    this.log.info({ node: reg.nodeName, pool: node.pool || undefined, poolError: node.poolError, bootId: reg.bootId, current: status.currentConfig || undefined, new: !existing }, 'node registered');
    stream.write({ registered: { pool: node.pool } });
    this.sessions.sendAssignment(reg.nodeName);
    this.hub.publish({ type: existing ? 'MODIFIED' : 'ADDED', kind: 'node', name: reg.nodeName });
    return node;
  }

  reportStatus(nodeName: string, status: NodeStatus): void {
    const clean = sanitizeStatus(status);
    this.state.updateNode(nodeName, (n) => {
      n.status = clean;
      n.lastSeen = Date.now();
    });
  }

  heartbeat(nodeName: string): void {
    const node = this.state.nodes.get(nodeName);
    if (node) node.lastSeen = Date.now();
  }

  disconnect(nodeName: string, stream: AgentStream): void {
    if (!this.sessions.detach(nodeName, stream)) return;
    this.state.updateNode(nodeName, (n) => { n.connected = false; });
    this.log.info({ node: nodeName }, 'node disconnected');
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
