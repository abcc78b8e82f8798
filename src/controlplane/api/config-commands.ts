// The operator's commands (ConfigService and IdentityService's RevokeNode): each validates what
// it is given, writes to the store in one commit and answers once the write has come back
// through the watch, or once the leader has acted on it (an Apply waits for the pools it touched
// to be rendered). Reads come from the cache; nothing here runs on the leader's behalf.

import {
  canonicalJson,
  ConflictError,
  KubernetesSourceError,
  configsForPool,
  InvalidDocumentError,
  labelProblem,
  MASTER_POOL,
  NodeNotConnectedError,
  NotTryingError,
  NotFoundError,
  PermissionDeniedError,
  PreconditionFailedError,
  RenderError,
  renderPool,
  StoreLimitError,
  tryTimeoutProblem,
  StoreUnavailableError,
  WORKER_POOL,
  type ApplyRequest,
  type MachineConfig,
  type MachineConfigPool,
  type MachineConfiguration,
  type NodeRecord,
  type Problem,
  type UpdateRecord,
} from '../../machineconfig/index.ts';
import { apiKind, API_KIND_NAMES, isApiKind, type ApiKind, type DeleteRule } from '../../machineconfig/api-kinds.ts';
import { isSourceKind } from '../../machineconfig/generated-configs.ts';
import type { Logger } from '../../runtime/logger.ts';
import { previewApply, type AppliedDocuments, type ApplyPreview } from '../cache/apply-preview.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import { generatedConfigsFor, generatedConfigWrites } from '../cache/generated-config-plan.ts';
import type { Clock } from '../replica/clock.ts';
import { DELETED_WITH_NODE } from '../store/kinds.ts';
import { revocationWrites } from '../cache/node-revocation.ts';
import type { Store, StoredKind, StoredObject, WriteOp } from '../store/store.ts';
import type { ConfigTryRecord, NodeRecordValue, PoolResumeRecord, ReapplyRequestRecord, RevokedCertificateRecord, TryConfirmationRecord } from '../store/stored-records.ts';

/** `mcctl apply --try`: the timeout, and who asked (the ConfigTry records name them). */
export interface ApplyTry {
  timeout: string;
  requestedBy: string;
}

export interface AppliedObject {
  kind: string;
  name: string;
  action: 'created' | 'configured' | 'unchanged';
}

export interface ConfigCommandsOptions {
  /** How long a command waits for the leader to act on what it stored (default 15 s). */
  renderWaitMs?: number;
  /** The time the preview and the resume request read. */
  clock: Clock;
  /**
   * With --kubernetes-source, the cluster (its API server) MachineConfigs and pools come from:
   * changes to them are refused here. Absent: they are changed here.
   */
  sourceCluster?: string;
}

/** Nodes per pool whose update history a dry run reads for its batch times. */
const PREVIEW_HISTORY_SAMPLE = 50;
/** The kinds `mcctl delete` removes: those the catalogue gives a delete rule. */
const DELETABLE = API_KIND_NAMES.filter((k) => apiKind(k).deleteRule !== undefined);

export class ConfigCommands {
  readonly #cache: ClusterCache;
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #renderWaitMs: number;
  readonly #sourceCluster: string | undefined;

  private readonly log: Logger;
  constructor(cache: ClusterCache, options: ConfigCommandsOptions, log: Logger) {
    this.log = log;
    this.#cache = cache;
    this.#store = cache.store;
    this.#clock = options.clock;
    this.#renderWaitMs = options.renderWaitMs ?? 15_000;
    this.#sourceCluster = options.sourceCluster;
  }

  /**
   * Stores every object of the request or none, in one commit. Answers once the commit is durable
   * and the leader has rendered the pools it touched (seen through the watch); a dry run stores
   * nothing and answers with the preview instead.
   */
  async apply(request: ApplyRequest, dryRun = false, tried?: ApplyTry): Promise<{ objects: AppliedObject[]; preview?: ApplyPreview; warnings: string[] }> {
    if (tried) {
      const problem = tryTimeoutProblem(tried.timeout);
      if (problem) throw new InvalidDocumentError([{ object: 'mcctl apply', field: '--try', rule: 'duration', message: problem }]);
    }
    this.#refuseInSourceMode([...request.configs.map((c) => `MachineConfig/${c.metadata.name}`), ...request.pools.map((p) => `MachineConfigPool/${p.metadata.name}`), ...request.sources.map((o) => `${o.kind}/${o.metadata.name}`)], 'applied');

    const ops: WriteOp[] = [];
    const results: AppliedObject[] = [];
    const touchedConfigs: MachineConfig[] = [];
    const touchedPools = new Set<string>();
    /** Records what Apply does to one object and queues its write; whether it changes. */
    const put = <T>(kind: StoredKind, name: string, value: T, existing: StoredObject<T> | undefined): boolean => {
      const action = !existing ? 'created' : canonicalJson(existing.value) === canonicalJson(value) ? 'unchanged' : 'configured';
      results.push({ kind, name, action });
      if (action === 'unchanged') return false;
      ops.push({ type: 'put', kind, name, value, expectedVersion: existing?.resourceVersion ?? null, ...(existing ? { createdAt: existing.createdAt } : {}) });
      return true;
    };
    /** What changes, for the preview: an object identical to the stored one previews nothing. */
    const changed = { configs: [] as MachineConfig[], pools: [] as MachineConfigPool[], machineConfigurations: [] as MachineConfiguration[] };
    for (const mc of request.configs) {
      const existing = this.#cache.configs.get(mc.metadata.name);
      if (!put('MachineConfig', mc.metadata.name, mc, existing)) continue;
      touchedConfigs.push(mc, ...(existing ? [existing.value] : []));
      changed.configs.push(mc);
    }
    for (const pool of request.pools) {
      if (!put('MachineConfigPool', pool.metadata.name, pool, this.#cache.pools.get(pool.metadata.name))) continue;
      touchedPools.add(pool.metadata.name);
      changed.pools.push(pool);
    }
    // Nothing renders from a MachineConfiguration: the dispatchers re-send every assignment with
    // the new policy.
    for (const mcfg of request.machineConfigurations) {
      if (put('MachineConfiguration', mcfg.metadata.name, mcfg, this.#cache.machineConfiguration)) changed.machineConfigurations.push(mcfg);
    }
    // The leader's generated-config controller makes MachineConfigs of these (or reports why not):
    // the pools whose generated configs change are waited for like the others, and a dry run
    // previews those configs as the MachineConfigs they are.
    for (const source of request.sources) put(source.kind, source.metadata.name, source, this.#cache.sourcesOf(source.kind).get(source.metadata.name));
    const generated = request.sources.length > 0 ? generatedConfigWrites(this.#cache, generatedConfigsFor(this.#cache, request.sources).configs) : { ops: [], changed: [] };
    touchedConfigs.push(...generated.changed);
    const generatedConfigs = generated.ops.flatMap((op) => (op.type === 'put' ? [op.value as MachineConfig] : []));
    const tries = tried ? this.#configTries(request, generatedConfigs, touchedConfigs, tried) : [];
    const warnings: string[] = [];
    if (tried && tries.length === 0) warnings.push(`--try ${tried.timeout}: this Apply gives no pool a new rendered config, so nothing is tried`);
    for (const t of tries) put('ConfigTry', t.config, t.value, this.#cache.configTries.get(t.config));
    if (dryRun) {
      changed.configs.push(...generatedConfigs);
      return { objects: results, preview: await this.#preview(changed, tried?.timeout), warnings };
    }
    if (ops.length === 0) return { objects: results, warnings };
    const { revision } = await this.#store.commit(ops).catch((err: unknown) => {
      // All or nothing means one transaction, and a transaction has etcd's limits.
      if (err instanceof StoreLimitError) {
        throw new InvalidDocumentError([{ object: 'request', field: 'manifests', rule: 'apply-size', message: `an Apply is stored in one transaction, so all its objects together must fit in one: ${err.message}. Apply them in several smaller requests` }]);
      }
      throw err;
    });
    this.log.info({ objects: results.filter((r) => r.action !== 'unchanged') }, 'applied');
    // Only pools something of this Apply re-renders are waited for: an unchanged pool beside a
    // changed PinnedImageSet (which renders nothing) would never be rendered again, and the Apply
    // would fail after storing.
    for (const name of this.#poolsSelecting(touchedConfigs, changed.pools)) touchedPools.add(name);
    await this.#waitForRender(touchedPools, revision);
    // Another Apply between this one's commit and the render makes a config this one did not
    // foresee: that one is not tried, and the user is told.
    for (const t of tries) {
      const target = this.#cache.poolTarget(t.value.pool);
      if (target !== t.config) warnings.push(`--try ${tried!.timeout}: MachineConfigPool/${t.value.pool} targets ${target ?? 'nothing'}, not ${t.config} as this Apply rendered it (another change came in between): ${target ?? 'it'} is not tried`);
    }
    if (tries.length) this.log.info({ tries: tries.map((t) => ({ pool: t.value.pool, config: t.config })), timeout: tried!.timeout, requestedBy: tried!.requestedBy }, 'apply --try: the configs this Apply renders are tried');
    return { objects: results, warnings };
  }

  /**
   * `mcctl apply --try`: the rendered config each pool the Apply touches will get, computed as
   * the leader renders it (renderPool over the stored configs with the Apply's laid over them),
   * recorded so that every node handed it tries it. Pools whose config stays (or would fail to
   * render) try nothing.
   */
  #configTries(request: ApplyRequest, generatedConfigs: readonly MachineConfig[], touchedConfigs: readonly MachineConfig[], tried: ApplyTry): { config: string; value: ConfigTryRecord }[] {
    const configs = new Map([...this.#cache.configs].map(([name, o]) => [name, o.value]));
    for (const mc of [...request.configs, ...generatedConfigs]) configs.set(mc.metadata.name, mc);
    const all = [...configs.values()];
    const out: { config: string; value: ConfigTryRecord }[] = [];
    for (const name of [...this.#poolsSelecting(touchedConfigs, request.pools)].sort()) {
      const pool = request.pools.find((p) => p.metadata.name === name) ?? this.#cache.pools.get(name)?.value;
      if (!pool) continue;
      let rendered: string;
      try {
        rendered = renderPool(pool, all).name;
      } catch (err) {
        if (err instanceof RenderError) continue;
        throw err;
      }
      if (rendered === this.#cache.poolTarget(name)) continue;
      out.push({ config: rendered, value: { pool: name, timeout: tried.timeout, requestedBy: tried.requestedBy, requestedAt: this.#clock.now() } });
    }
    return out;
  }

  /** The dry-run preview of what an Apply changes (`applied`: its generated configs among them). */
  async #preview(applied: AppliedDocuments, tryTimeout?: string): Promise<ApplyPreview> {
    // What updates take, from the histories of up to PREVIEW_HISTORY_SAMPLE nodes per pool, read
    // when asked: a history is up to 20 updates with their phases, and a median needs no more.
    const sample: string[] = [];
    const perPool = new Map<string, number>();
    for (const n of this.#cache.nodes.values()) {
      const taken = perPool.get(n.pool) ?? 0;
      if (taken >= PREVIEW_HISTORY_SAMPLE) continue;
      perPool.set(n.pool, taken + 1);
      sample.push(n.name);
    }
    const history = new Map<string, UpdateRecord[]>();
    // A few reads at a time: a dry run must not flood the store that the fleet's writes go to.
    for (let i = 0; i < sample.length; i += 16) {
      const names = sample.slice(i, i + 16);
      const records = await Promise.all(names.map((name) => this.#store.get('NodeHistory', name)));
      names.forEach((name, j) => history.set(name, records[j]?.value.updates ?? []));
    }
    return previewApply(this.#cache, applied, this.#clock.now(), history, tryTimeout);
  }

  async delete(kind: string, name: string, requestedBy = 'unknown'): Promise<void> {
    if (!isApiKind(kind)) {
      throw new InvalidDocumentError([{ object: `${kind}/${name}`, field: 'kind', rule: 'unknown-kind', message: `cannot delete kind "${kind}": use ${DELETABLE.slice(0, -1).join(', ')} or ${DELETABLE.at(-1)}` }]);
    }
    // The catalogue says how a kind is deleted; each rule is one of the deleters below. A derived
    // kind has no rule: nothing of it is stored, it goes when its node goes.
    const rule = apiKind(kind).deleteRule;
    if (!rule) {
      throw new InvalidDocumentError([{ object: `${kind}/${name}`, field: 'kind', rule: 'derived-kind', message: `${kind} cannot be deleted: the control plane derives it from node ${name}'s records; it goes with the node (mcctl delete node ${name})` }]);
    }
    const { revision, touchedPools } = await this.#deleters[rule](kind, name, requestedBy);
    await this.#cache.waitForRevision(revision);
    await this.#waitForRender(touchedPools, revision);
    this.log.info({ kind, name }, 'deleted');
  }

  /** How each delete rule of the catalogue removes an object: the commit's revision and the pools to re-render. */
  readonly #deleters: Record<DeleteRule, (kind: ApiKind, name: string, requestedBy: string) => Promise<{ revision: number; touchedPools: Set<string> }>> = {
    config: async (kind, name) => {
      this.#refuseInSourceMode([`${kind}/${name}`], 'deleted');
      const existing = this.#cache.configs.get(name);
      if (!existing) throw new NotFoundError(kind, name);
      const { revision } = await this.#store.commit([{ type: 'delete', kind: 'MachineConfig', name, expectedVersion: existing.resourceVersion }]);
      return { revision, touchedPools: this.#poolsSelecting([existing.value], []) };
    },
    pool: async (kind, name) => {
      this.#refuseInSourceMode([`${kind}/${name}`], 'deleted');
      if (name === MASTER_POOL || name === WORKER_POOL) {
        throw new PermissionDeniedError(`MachineConfigPool/${name} is built in and cannot be deleted (MCO recreates it too); pause it instead`);
      }
      const existing = this.#cache.pools.get(name);
      if (!existing) throw new NotFoundError(kind, name);
      const { revision } = await this.#store.commit([{ type: 'delete', kind: 'MachineConfigPool', name, expectedVersion: existing.resourceVersion }]);
      return { revision, touchedPools: new Set() };
    },
    source: async (kind, name) => {
      if (!isSourceKind(kind)) throw new Error(`${kind} has the source delete rule but is no source kind`);
      this.#refuseInSourceMode([`${kind}/${name}`], 'deleted');
      const existing = this.#cache.sourcesOf(kind).get(name);
      if (!existing) throw new NotFoundError(kind, name);
      // Its generated configs go with it (the leader deletes them), and their pools re-render.
      const touchedPools = this.#poolsSelecting(generatedConfigWrites(this.#cache, generatedConfigsFor(this.#cache, [], `${kind}/${name}`).configs).changed, []);
      const { revision } = await this.#store.commit([{ type: 'delete', kind, name, expectedVersion: existing.resourceVersion }]);
      return { revision, touchedPools };
    },
    singleton: async (kind, name) => {
      // Without it, each pool's nodes follow their pool's own policy (or MCO's default: reboot).
      const existing = this.#cache.machineConfiguration;
      if (!existing || existing.name !== name) throw new NotFoundError(kind, name);
      const { revision } = await this.#store.commit([{ type: 'delete', kind: 'MachineConfiguration', name, expectedVersion: existing.resourceVersion }]);
      return { revision, touchedPools: new Set() };
    },
    node: async (kind, name, requestedBy) => {
      const record = this.#cache.nodeRecords.get(name);
      if (!record) throw new NotFoundError(kind, name);
      // Deleting a node retires its certificate too: otherwise the host could register again as
      // a new node, or keep the name from a host re-enrolled under it. Every replica ends the
      // node's open stream when it sees the record go.
      const { revision } = await this.#store.commit([
        { type: 'check', kind: 'Node', name, expectedVersion: record.resourceVersion },
        ...this.#revocation(name, record.value, requestedBy, 'deleted'),
        ...DELETED_WITH_NODE.map((k) => ({ type: 'delete' as const, kind: k, name })),
      ]);
      return { revision, touchedPools: new Set() };
    },
  };

  async setPoolPaused(name: string, paused: boolean): Promise<void> {
    this.#refuseInSourceMode([`MachineConfigPool/${name}`], paused ? 'paused' : 'resumed');
    const existing = this.#cache.pools.get(name);
    if (!existing) throw new NotFoundError('MachineConfigPool', name);
    if (!paused) await this.#resumeHaltedRollout(name);
    if (existing.value.spec.paused === paused) return;
    const pool: MachineConfigPool = structuredClone(existing.value);
    pool.spec.paused = paused;
    const { revision } = await this.#store.commit([{ type: 'put', kind: 'MachineConfigPool', name, value: pool, expectedVersion: existing.resourceVersion, createdAt: existing.createdAt }]);
    this.log.info({ pool: name, paused }, paused ? 'pool paused' : 'pool resumed');
    await this.#waitForRender(new Set([name]), revision);
  }

  /**
   * `mcctl resume pool` past the circuit breaker: the halt is the leader's record, so the resume
   * is a request it acts on (and deletes). Answers once the leader has cleared the halt.
   */
  async #resumeHaltedRollout(name: string): Promise<void> {
    const record = this.#cache.poolStatuses.get(name);
    const halt = record?.value.rollout?.halt;
    if (!record || !halt || halt.target !== record.value.target) return;
    const value: PoolResumeRecord = { target: halt.target, requestedAt: this.#clock.now() };
    const { revision } = await this.#store.commit([{ type: 'put', kind: 'PoolResume', name, value }]);
    this.log.info({ pool: name, target: halt.target }, 'resume past a rollout halt requested');
    await this.#cache.waitForRevision(revision);
    await this.#waitFor(
      () => this.#cache.poolStatuses.get(name)?.value.rollout?.halt?.target !== halt.target,
      () => `stored, but timed out after ${this.#renderWaitMs} ms waiting for the leader to clear the rollout halt of pool ${name}; the leader does it when it can`,
    );
  }

  /** Resolves once `done()` holds, or fails after the render wait with `timedOut()`: what is still missing. */
  async #waitFor(done: () => boolean, timedOut: () => string): Promise<void> {
    if (done()) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#cache.off('change', check);
        reject(new StoreUnavailableError(timedOut()));
      }, this.#renderWaitMs);
      const check = (): void => {
        if (!done()) return;
        clearTimeout(timer);
        this.#cache.off('change', check);
        resolve();
      };
      this.#cache.on('change', check);
    });
  }

  /** Stores a re-apply request; the replica holding the node's stream delivers it. */
  async reapplyNode(name: string, requestedBy: string): Promise<void> {
    const node = this.#cache.nodes.get(name);
    if (!node) throw new NotFoundError('Node', name);
    const session = this.#cache.sessions.get(name);
    if (!session) {
      throw new NodeNotConnectedError(`Node/${name} is not connected; the re-apply cannot be delivered (it gets its assignment again when it reconnects)`);
    }
    const value: ReapplyRequestRecord = { requestedBy, requestedAt: Date.now() };
    const { revision } = await this.#store.commit([
      { type: 'check', kind: 'AgentSession', name, expectedVersion: session.resourceVersion },
      { type: 'put', kind: 'ReapplyRequest', name, value },
    ]).catch((err: unknown) => {
      if (err instanceof ConflictError) throw new NodeNotConnectedError(`Node/${name} disconnected while the re-apply was being requested; try again when it is back`);
      throw err;
    });
    await this.#cache.waitForRevision(revision);
    this.log.info({ node: name, requestedBy, replica: session.value.replica }, 'forced re-apply requested');
  }

  /**
   * `mcctl confirm pool|node`: the tries in progress are confirmed by hand (spec.rollout.confirm).
   * A node tries while it reports phase "try"; each is sent a confirmation of the config it
   * tries, stored first so that whichever replica holds its stream delivers it. A node that is
   * not trying (or a pool with none) is refused, naming what it does instead.
   */
  async confirmTry(kind: string, name: string, requestedBy: string): Promise<{ node: string; config: string }[]> {
    if (kind !== 'pool' && kind !== 'node') throw new NotTryingError(`confirm takes "pool" or "node", got ${JSON.stringify(kind)}`);
    const trying = (n: NodeRecord): boolean => n.status.state === 'Working' && n.status.phase === 'try' && n.status.desiredConfig !== '';
    let nodes: NodeRecord[];
    if (kind === 'node') {
      const node = this.#cache.nodes.get(name);
      if (!node) throw new NotFoundError('Node', name);
      if (!trying(node)) throw new NotTryingError(`Node/${name} is not trying a config (state ${node.status.state}${node.status.phase ? `, phase ${node.status.phase}` : ''}); only a node in phase "try" can be confirmed`);
      nodes = [node];
    } else {
      if (!this.#cache.pools.get(name)) throw new NotFoundError('MachineConfigPool', name);
      nodes = [...this.#cache.nodes.values()].filter((n) => n.pool === name && trying(n));
      if (nodes.length === 0) throw new NotTryingError(`MachineConfigPool/${name} has no node trying a config (phase "try"); nothing to confirm`);
    }
    const ops: WriteOp[] = [];
    for (const n of nodes) {
      const session = this.#cache.sessions.get(n.name);
      if (!session) throw new NodeNotConnectedError(`Node/${n.name} is not connected; its try cannot be confirmed (it reverts by itself at its deadline)`);
      const value: TryConfirmationRecord = { config: n.status.desiredConfig, requestedBy, requestedAt: Date.now() };
      ops.push({ type: 'check', kind: 'AgentSession', name: n.name, expectedVersion: session.resourceVersion }, { type: 'put', kind: 'TryConfirmation', name: n.name, value });
    }
    const { revision } = await this.#store.commit(ops).catch((err: unknown) => {
      if (err instanceof ConflictError) throw new NodeNotConnectedError(`a node of ${kind === 'pool' ? `MachineConfigPool/${name}` : `Node/${name}`} disconnected while its try was being confirmed; try again`);
      throw err;
    });
    await this.#cache.waitForRevision(revision);
    const confirmed = nodes.map((n) => ({ node: n.name, config: n.status.desiredConfig }));
    this.log.info({ confirmed, requestedBy }, 'tries confirmed by hand');
    return confirmed;
  }

  /**
   * Revokes every certificate issued for the node so far: the one it is bound to is listed as
   * revoked, and the name's generation rises, so the certificates it renewed from (and any other
   * older one) are refused too. Every replica ends the node's open streams at once. The node stays
   * listed, disconnected; the next certificate the CA issues for its name at the new generation
   * (an enrollment, or `mcctl pki node NAME --generation G`) binds it again.
   */
  async revokeNode(name: string, requestedBy: string): Promise<{ serial: string; generation: number }> {
    const record = this.#cache.nodeRecords.get(name);
    if (!record) throw new NotFoundError('Node', name);
    const bound = record.value.certificate;
    if (!bound) throw new PreconditionFailedError(`Node/${name} is bound to no certificate (it has not registered over TLS since it was enrolled); nothing to revoke. To retire it: mcctl delete node ${name}`);
    const { certificate: _revoked, previousCertificate: _previous, ...rest } = record.value;
    const { revision } = await this.#store.commit([
      ...this.#revocation(name, record.value, requestedBy, 'revoked'),
      { type: 'put', kind: 'Node', name, value: rest, expectedVersion: record.resourceVersion, createdAt: record.createdAt },
    ]);
    await this.#cache.waitForRevision(revision);
    const generation = this.#cache.nodeGeneration(name);
    this.log.warn({ node: name, serial: bound.serial, generation, requestedBy }, 'node certificate revoked');
    return { serial: bound.serial, generation };
  }

  #revocation(name: string, record: NodeRecordValue, requestedBy: string, reason: RevokedCertificateRecord['reason']): WriteOp[] {
    return revocationWrites(this.#cache, name, record, requestedBy, reason);
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
    const record = this.#cache.nodeRecords.get(name);
    if (!record) throw new NotFoundError('Node', name);
    if (this.#cache.kubernetesNodes.has(name)) {
      // Stored labels would be ignored: the cluster's Node object decides them.
      throw new PermissionDeniedError(`Node/${name} is a Kubernetes Node: its labels come from the cluster; use kubectl label node ${name} ...`);
    }
    const labels = { ...record.value.labels, ...set };
    for (const k of remove) delete labels[k];
    const { ignoredLabels: _forgotten, reportedLabels, ...rest } = record.value;
    // A key the operator set or removed is the operator's from now on: it may choose a pool.
    const stillReported = Object.fromEntries(Object.entries(reportedLabels ?? {}).filter(([k]) => !(k in set) && !remove.includes(k)));
    const value: NodeRecordValue = { ...rest, labels, ...(Object.keys(stillReported).length ? { reportedLabels: stillReported } : {}) };
    const { revision } = await this.#store.commit([{ type: 'put', kind: 'Node', name, value, expectedVersion: record.resourceVersion, createdAt: record.createdAt }]);
    await this.#cache.waitForRevision(revision);
    this.log.info({ node: name, set, remove, requestedBy }, 'node labels changed');
  }

  /**
   * In source mode the cluster owns MachineConfigs, pools and the higher-level configs: a change
   * made here would be put back at the next sync, so it is refused with the way to make it in
   * the cluster.
   */
  #refuseInSourceMode(objects: string[], verb: string): void {
    if (this.#sourceCluster === undefined || objects.length === 0) return;
    const server = this.#sourceCluster;
    const how = verb === 'deleted' ? 'oc delete' : verb === 'applied' ? 'oc apply -f' : `oc patch mcp --type=merge -p '{"spec":{"paused":${verb === 'paused'}}}'`;
    throw new KubernetesSourceError(`${objects.join(', ')} cannot be ${verb} here: this control plane runs with --kubernetes-source, so MachineConfigs, MachineConfigPools and the higher-level configs come from the Kubernetes cluster (${server}); change them there (${how}) and mcplane follows`);
  }

  /** Pools whose rendered config may change with these configs (or that are these pools). */
  #poolsSelecting(configs: readonly MachineConfig[], pools: readonly MachineConfigPool[]): Set<string> {
    const names = new Set(pools.map((p) => p.metadata.name));
    if (configs.length === 0) return names;
    for (const [name, stored] of this.#cache.pools) {
      if (configsForPool(stored.value, configs).length > 0) names.add(name);
    }
    return names;
  }

  /** Resolves once the leader has rendered each pool from a store revision at or after `revision`. */
  async #waitForRender(pools: Set<string>, revision: number): Promise<void> {
    await this.#cache.waitForRevision(revision);
    const pending = (): string[] => [...pools].filter((p) => this.#cache.pools.has(p) && (this.#cache.poolStatuses.get(p)?.value.renderedRevision ?? 0) < revision);
    await this.#waitFor(() => pending().length === 0, () => {
      const left = pending();
      const leader = this.#cache.leader?.value.replica;
      return `stored, but pool${left.length === 1 ? '' : 's'} ${left.join(', ')} ${left.length === 1 ? 'was' : 'were'} not rendered within ${this.#renderWaitMs} ms (${leader ? `leader: ${leader}` : 'no replica leads right now'}); the leader renders ${left.length === 1 ? 'it' : 'them'} when it can`;
    });
  }
}
