// --kubernetes-source: the cluster's machineconfiguration.openshift.io/v1 MachineConfigs and
// MachineConfigPools, and MCO's higher-level configs (KubeletConfig, ContainerRuntimeConfig, the
// cluster Image config and the image mirror sets), are mcplane's source, so operators keep
// `oc apply -f` once the cluster exists. On the leader only (like render and rollout), this
// controller lists and watches these kinds and writes them into the store through Apply's
// validation: created, changed and deleted in the cluster, they follow in the store. mcplane
// generates the MachineConfigs of the higher-level configs itself, as with `mcctl import`, so the
// cluster's MCO output for a config it takes (a MachineConfig owned by it) is not taken; a kind
// the cluster has no CRD for has none. An object that fails validation is not written (its
// last good version, if any, keeps rendering); the pools it feeds show RenderDegraded with every
// problem, and the object gets a Warning Event. Each pool's status goes back to its
// MachineConfigPool's status subresource in MCO's shape.

import {
  API_VERSION,
  canonicalJson,
  formatProblem,
  generatedFromImported,
  isRenderedConfigName,
  manifestFromClusterObject,
  SOURCE_RESOURCES,
  MASTER_POOL,
  parseDocuments,
  StoreLimitError,
  WORKER_POOL,
  type Problem,
} from '../../machineconfig/index.ts';
import { IMPORTED_KINDS, type ImportedKind, type SourceKind } from '../../machineconfig/api-kinds.ts';
import { isGeneratedConfig } from '../../machineconfig/generated-configs.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import type { Controller, ReconcileResult } from './controller.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import type { StoredKind, StoredObject } from '../store/store.ts';
import { KUBERNETES_SOURCE_KEY, type KubernetesSourceRecord, type SourceObjectProblems } from '../store/stored-records.ts';
import { ClusterInformer, customResourceSource, type ClusterObject } from '../kubernetes/cluster-informer.ts';
import { EventRecorder } from '../kubernetes/event-recorder.ts';
import { kubeFailureOf, type KubernetesAccess } from '../kubernetes/kube-client.ts';
import { mcoInvalidPoolStatus, mcoPoolStatus, type McoPoolStatus } from '../kubernetes/mco-pool-status.ts';

const GROUP = 'machineconfiguration.openshift.io';
const VERSION = 'v1';
/** What this controller takes from the cluster. */
type MirroredKind = ImportedKind;
/** How a problem's source reads in messages: `kubernetes: MachineConfig/50-x: spec...`. */
const SOURCE = 'kubernetes';
const RETRY_MS = 1000;

export class KubernetesSourceController implements Controller {
  readonly name = 'kubernetes-source';
  readonly leaderOnly = true;
  readonly configs: ClusterInformer;
  readonly pools: ClusterInformer;
  /** The higher-level configs, each kind optional (a cluster without its CRD has none). */
  readonly higherLevel: ReadonlyMap<SourceKind, ClusterInformer>;
  readonly #events: EventRecorder;
  #wake: () => void = () => {};
  #leading = false;
  /** uid -> `generation|message` of the Warning last recorded for it in this leadership. */
  readonly #reported = new Map<string, string>();
  /**
   * `kind/name` -> the validation of the version last seen (by resourceVersion): every pool
   * status change runs this controller, and a real 00-worker is large, so each version is
   * parsed once.
   */
  readonly #parsed = new Map<string, { resourceVersion: string; value: unknown; problems: Problem[]; matchesStoreAt?: string }>();

  private readonly cache: ClusterCache;
  private readonly writer: LeaderWriter;
  private readonly kube: KubernetesAccess;
  private readonly log: Logger;
  constructor(cache: ClusterCache, writer: LeaderWriter, kube: KubernetesAccess, log: Logger) {
    this.cache = cache;
    this.writer = writer;
    this.kube = kube;
    this.log = log;
    this.configs = new ClusterInformer(kube, customResourceSource(kube, { group: GROUP, version: VERSION, plural: 'machineconfigs' }), log);
    this.pools = new ClusterInformer(kube, customResourceSource(kube, { group: GROUP, version: VERSION, plural: 'machineconfigpools' }), log);
    this.#events = new EventRecorder(kube, log);
    this.higherLevel = new Map(SOURCE_RESOURCES.map((r) => [r.kind, new ClusterInformer(kube, customResourceSource(kube, r, { optional: true }), log)]));
    for (const informer of this.#informers()) informer.on('change', () => this.#wake());
  }

  #informers(): ClusterInformer[] {
    return [this.configs, this.pools, ...this.higherLevel.values()];
  }

  bindWake(wake: () => void): void {
    this.#wake = wake;
  }

  /** Watches the cluster only while this replica leads: followers neither read nor write it. */
  setLeading(leading: boolean): void {
    this.#leading = leading;
    if (leading) {
      for (const informer of this.#informers()) informer.start();
    } else {
      for (const informer of this.#informers()) informer.stop();
      this.#reported.clear();
    }
  }

  interestedIn(change: CacheChange): boolean {
    // Store changes matter too: a pool's new status goes back to the cluster, and anything
    // written to these kinds behind the source's back is put back as the cluster has it.
    const watched: StoredKind[] = [...IMPORTED_KINDS, 'PoolStatus', 'KubernetesSource'];
    return watched.some((k) => change.changed.has(k));
  }

  async reconcile(): Promise<ReconcileResult | void> {
    // Until both kinds are listed, "not seen yet" must not read as "deleted in the cluster".
    if (!this.#leading || this.#informers().some((i) => !i.synced)) return;
    const invalid: SourceObjectProblems[] = [];
    // Higher-level configs first: the MachineConfigs MCO generated from them are not taken.
    for (const [kind, informer] of this.higherLevel) await this.#sync(kind, informer, this.cache.sourcesOf(kind), invalid);
    const owners = new Set([...this.higherLevel].flatMap(([kind, informer]) => [...informer.objects.keys()].map((name) => `${kind}/${name}`)));
    await this.#sync('MachineConfig', this.configs, this.cache.configs, invalid, owners);
    await this.#sync('MachineConfigPool', this.pools, this.cache.pools, invalid);
    invalid.sort((a, b) => a.kind.localeCompare(b.kind) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    await this.#storeProblems(invalid);
    await this.#recordEvents(invalid);
    const retry = await this.#writePoolStatuses(invalid);
    return retry ? { requeueAfterMs: RETRY_MS } : undefined;
  }

  /**
   * Makes the store's objects of `kind` what the cluster has. `owners` ("Kind/name" of the
   * higher-level configs taken): a MachineConfig MCO generated from one of them is its output,
   * not input, and mcplane generates its own of the same name.
   */
  async #sync(kind: MirroredKind, informer: ClusterInformer, stored: ReadonlyMap<string, StoredObject<any>>, invalid: SourceObjectProblems[], owners?: ReadonlySet<string>): Promise<void> {
    const inCluster = new Set<string>();
    for (const object of informer.objects.values()) {
      const name = object.metadata.name;
      if (kind === 'MachineConfig' && isRenderedConfigName(name)) continue;
      if (owners && generatedFromImported(object, owners)) continue;
      inCluster.add(name);
      const { value, problems } = this.#validate(kind, object);
      if (problems.length > 0 || !value) {
        invalid.push(problemsOf(kind, object, problems));
        continue;
      }
      const existing = stored.get(name);
      const entry = this.#parsed.get(`${kind}/${name}`);
      if (existing && entry?.matchesStoreAt === existing.resourceVersion) continue;
      if (existing && canonicalJson(existing.value) === canonicalJson(value)) {
        if (entry) entry.matchesStoreAt = existing.resourceVersion;
        continue;
      }
      try {
        await this.writer.commit([{
          type: 'put', kind, name, value,
          expectedVersion: existing?.resourceVersion ?? null, ...(existing ? { createdAt: existing.createdAt } : {}),
        }]);
        this.log.info({ kind, name, resourceVersion: object.metadata.resourceVersion, action: existing ? 'configured' : 'created' }, 'taken from the Kubernetes cluster');
      } catch (err) {
        if (!(err instanceof StoreLimitError)) throw err;
        invalid.push(problemsOf(kind, object, [{ source: SOURCE, object: `${kind}/${name}`, field: 'spec', rule: 'apply-size', message: `too large to store as one object: ${err.message}` }]));
      }
    }
    for (const key of this.#parsed.keys()) {
      if (key.startsWith(`${kind}/`) && !inCluster.has(key.slice(kind.length + 1))) this.#parsed.delete(key);
    }
    for (const [name, existing] of stored) {
      if (inCluster.has(name)) continue;
      // mcplane's own output from the higher-level configs: the generated-config lane keeps it.
      if (kind === 'MachineConfig' && isGeneratedConfig(existing.value)) continue;
      // MCO's built-in pools exist in every cluster; without them mcplane keeps its own.
      if (kind === 'MachineConfigPool' && (name === MASTER_POOL || name === WORKER_POOL)) continue;
      await this.writer.commit([{ type: 'delete', kind, name, expectedVersion: existing.resourceVersion }]);
      this.log.info({ kind, name }, 'deleted: no longer in the Kubernetes cluster');
    }
  }

  /** Apply's validation of one cluster object, remembered per resourceVersion. */
  #validate(kind: MirroredKind, object: ClusterObject): { value: unknown; problems: Problem[]; matchesStoreAt?: string } {
    const key = `${kind}/${object.metadata.name}`;
    const resourceVersion = object.metadata.resourceVersion ?? '';
    const cached = this.#parsed.get(key);
    if (cached && resourceVersion && cached.resourceVersion === resourceVersion) return cached;
    const parsed = parseDocuments([{ source: SOURCE, value: manifestFromClusterObject(kind, object) }]);
    const value = kind === 'MachineConfig' ? parsed.configs[0] : kind === 'MachineConfigPool' ? parsed.pools[0] : parsed.sources[0];
    const result = { resourceVersion, value, problems: boundedProblems(parsed.problems) };
    this.#parsed.set(key, result);
    return result;
  }

  async #storeProblems(invalid: SourceObjectProblems[]): Promise<void> {
    const current = this.cache.kubernetesSource;
    const value: KubernetesSourceRecord = { invalid };
    if (current && canonicalJson(current.value) === canonicalJson(value)) return;
    if (!current && invalid.length === 0) return;
    for (const o of invalid) {
      if (!current?.value.invalid.some((p) => p.uid === o.uid && canonicalJson(p.problems) === canonicalJson(o.problems))) {
        this.log.warn({ kind: o.kind, name: o.name, problems: o.problems.map(formatProblem) }, 'not taken from the Kubernetes cluster: invalid; its last good version stays');
      }
    }
    await this.writer.commit([{
      type: 'put', kind: 'KubernetesSource', name: KUBERNETES_SOURCE_KEY, value,
      expectedVersion: current?.resourceVersion ?? null, ...(current ? { createdAt: current.createdAt } : {}),
    }]);
  }

  async #recordEvents(invalid: SourceObjectProblems[]): Promise<void> {
    const live = new Set(invalid.map((o) => o.uid));
    for (const uid of this.#reported.keys()) if (!live.has(uid)) this.#reported.delete(uid);
    for (const o of invalid) {
      const message = invalidMessage(o, this.cache);
      const signature = `${o.generation}|${message}`;
      if (this.#reported.get(o.uid) === signature) continue;
      this.#reported.set(o.uid, signature);
      const object = this.#informerOf(o.kind).objects.get(o.name);
      const resource = SOURCE_RESOURCES.find((r) => r.kind === o.kind);
      await this.#events.record(
        { apiVersion: resource ? `${resource.group}/${resource.version}` : API_VERSION, kind: o.kind, name: o.name, uid: o.uid, ...(object?.metadata.resourceVersion ? { resourceVersion: object.metadata.resourceVersion } : {}) },
        'Warning', `Invalid${o.kind}`, message,
      );
    }
  }

  #informerOf(kind: MirroredKind): ClusterInformer {
    return kind === 'MachineConfig' ? this.configs : kind === 'MachineConfigPool' ? this.pools : this.higherLevel.get(kind)!;
  }

  /** MCO's status on every MachineConfigPool in the cluster; true when a write must be retried. */
  async #writePoolStatuses(invalid: SourceObjectProblems[]): Promise<boolean> {
    let retry = false;
    for (const object of [...this.pools.objects.values()]) {
      const name = object.metadata.name;
      const generation = object.metadata.generation ?? 1;
      const current = object.status as McoPoolStatus | undefined;
      const bad = invalid.find((o) => o.kind === 'MachineConfigPool' && o.name === name);
      const spec = this.cache.pools.get(name);
      const record = this.cache.poolStatuses.get(name);
      let desired: McoPoolStatus;
      if (!spec) {
        if (!bad) continue; // not stored yet: the next pass has it
        desired = mcoInvalidPoolStatus(generation, bad.problems, current?.conditions);
      } else {
        if (!record?.value.status) continue; // not rendered yet
        // observedGeneration says which spec the status answers: this generation once its spec
        // is stored and rendered (or refused, with the reason in RenderDegraded).
        const rendered = record.value.renderedRevision >= Number(spec.resourceVersion);
        const observed = bad || rendered ? generation : (current?.observedGeneration ?? 0);
        desired = mcoPoolStatus(observed, record.value.status);
      }
      if (current && canonicalJson(current) === canonicalJson(desired)) continue;
      try {
        const written = await this.kube.custom.replaceClusterCustomObjectStatus({
          group: GROUP, version: VERSION, plural: 'machineconfigpools', name, body: { ...object, status: desired },
        }) as ClusterObject;
        // The watch brings this too; keeping it now avoids a second write from a stale copy.
        if (written?.metadata?.name) this.pools.objects.set(name, written);
      } catch (err) {
        const failure = kubeFailureOf(err);
        if (failure.code === 404) continue; // deleted meanwhile; the watch says so
        if (failure.code !== 409) this.log.warn({ pool: name, error: failure.message }, 'cannot write the MachineConfigPool status to the cluster; retrying');
        retry = true;
      }
    }
    return retry;
  }
}

/** Problems kept per object: enough to act on, and the record stays far below the store's limits. */
const MAX_PROBLEMS_PER_OBJECT = 20;

function boundedProblems(problems: Problem[]): Problem[] {
  if (problems.length <= MAX_PROBLEMS_PER_OBJECT) return problems;
  const first = problems.slice(0, MAX_PROBLEMS_PER_OBJECT);
  const last = first[first.length - 1]!;
  return [...first, { ...last, field: '', rule: 'more-problems', message: `... and ${problems.length - MAX_PROBLEMS_PER_OBJECT} more problems (fix these to see the rest)` }];
}

function problemsOf(kind: MirroredKind, object: ClusterObject, problems: Problem[]): SourceObjectProblems {
  const labels = object.metadata.labels;
  return {
    kind,
    name: object.metadata.name,
    labels: labels !== null && typeof labels === 'object' ? Object.fromEntries(Object.entries(labels).filter(([, v]) => typeof v === 'string')) as Record<string, string> : {},
    uid: object.metadata.uid ?? `${kind}/${object.metadata.name}`,
    generation: object.metadata.generation ?? 0,
    problems,
  };
}

/** The Event's message: what was refused, what is used instead, and every problem. */
function invalidMessage(o: SourceObjectProblems, cache: ClusterCache): string {
  const stored = o.kind === 'MachineConfig' ? cache.configs.has(o.name) : o.kind === 'MachineConfigPool' ? cache.pools.has(o.name) : cache.sourcesOf(o.kind).has(o.name);
  const keeping = stored ? 'mcplane keeps using its last good version' : 'mcplane has no valid version of it, so it is not used';
  return `${o.kind}/${o.name} is invalid and was not taken (${keeping}): ${o.problems.map(formatProblem).join('; ')}`;
}
