// Renders each pool whose inputs changed (its spec, or a config it selects) and points the pool
// at the result: the rendered config and the pool's target in one commit (the config first when
// both would not fit in one request), each write safe to repeat. A failed render leaves the pool
// on its last good config and keeps the problems for RenderDegraded. Rendered configs are garbage-collected, but never one a node's current or
// desired config names: MCO strands nodes when it deletes those.

import { configsForPool, ConflictError, RenderError, renderPool, sha256Hex, type RenderedConfig } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import { poolStatusFor } from '../cache/pool-status-now.ts';
import { referencedConfigs } from '../cache/referenced-configs.ts';
import { systemClock, type Clock } from '../replica/clock.ts';
import type { KeyedController } from './reconciler.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import type { ServerMetrics } from '../metrics/server-metrics.ts';
import { opBytes } from '../store/store-limits.ts';
import { STORE_LIMITS, type PutOp, type WriteOp } from '../store/store.ts';
import type { PoolStatusRecord, StoredRendered } from '../store/stored-records.ts';

/** Rendered configs kept per pool beyond the referenced ones, newest first. */
export const RENDERED_HISTORY = 5;

export class RenderController implements KeyedController<string> {
  readonly name = 'render';
  readonly leaderOnly = true;
  /** Pools rendered at once: a render is CPU, but its two writes need not wait for another pool's. */
  readonly concurrency = 2;

  private readonly cache: ClusterCache;
  private readonly writer: LeaderWriter;
  private readonly log: Logger;
  private readonly metrics?: Pick<ServerMetrics, 'observeRender'>;
  private readonly clock: Clock;
  constructor(
    cache: ClusterCache,
    writer: LeaderWriter,
    log: Logger,
    metrics?: Pick<ServerMetrics, 'observeRender'>,
    clock: Clock = systemClock,
  ) {
    this.cache = cache;
    this.writer = writer;
    this.log = log;
    this.metrics = metrics;
    this.clock = clock;
  }

  /**
   * A changed pool is its own key. A changed MachineConfig may enter or leave any pool's selection,
   * so every pool is a key: the inputs hash lets unchanged ones go without a render.
   */
  *keysFor(change: CacheChange): Iterable<string> {
    if (change.resync || change.changed.has('MachineConfig')) {
      // Deleted pools too, while their status or rendered configs are left to collect.
      yield* new Set([...this.cache.pools.keys(), ...this.cache.poolStatuses.keys(), ...[...this.cache.rendered.values()].map((r) => r.value.pool)]);
      return;
    }
    yield* change.changed.get('MachineConfigPool') ?? [];
  }

  async reconcile(name: string, signal: AbortSignal): Promise<void> {
    const stored = this.cache.pools.get(name);
    const current = this.cache.poolStatuses.get(name);
    if (!stored) {
      // A deleted pool's status goes with it, and its rendered configs as nodes leave them.
      if (current) await this.writer.commit([{ type: 'delete', kind: 'PoolStatus', name, expectedVersion: current.resourceVersion }], signal);
      await this.collectGarbage(name, signal);
      return;
    }
    // The revision goes with the snapshot it describes: the cache moves on while this reconcile
    // awaits its writes, and a render must not claim a revision whose configs it did not see.
    const revision = this.cache.revision;
    const configs = [...this.cache.configs.values()];
    const configValues = configs.map((o) => o.value);
    const pool = stored.value;
    const selected = configsForPool(pool, configValues);
    const inputs = sha256Hex(JSON.stringify([stored.resourceVersion, selected.map((mc) => [mc.metadata.name, this.cache.configs.get(mc.metadata.name)?.resourceVersion])]));
    if (current?.value.renderedInputs === inputs) {
      // Nothing new to render; configs no node uses any more may still be collected.
      await this.collectGarbage(name, signal);
      return;
    }
    const previous: PoolStatusRecord = current?.value ?? { target: '', targetSources: [], renderProblems: [], renderedInputs: '', renderedRevision: 0 };
    let next: PoolStatusRecord;
    /** A rendered config not stored yet: it goes with the pool's new target, or just before it. */
    let newRendered: WriteOp | undefined;
    const started = performance.now();
    // The merge and its size check, not the writes after them: those are the store's latency.
    const elapsed = (): number => (performance.now() - started) / 1000;
    try {
      const rendered = renderPool(pool, configValues);
      const op = renderedConfigPut(rendered);
      const exists = this.cache.rendered.has(rendered.name);
      if (!exists) checkRenderedSize(name, op);
      this.metrics?.observeRender(elapsed(), true);
      if (!exists) newRendered = op;
      if (previous.target !== rendered.name) {
        this.log.info({ pool: name, from: previous.target || undefined, to: rendered.name, sources: rendered.sources.length }, 'pool target changed');
      }
      next = { ...previous, target: rendered.name, targetSources: rendered.sources, renderProblems: [], renderedInputs: inputs, renderedRevision: revision };
    } catch (err) {
      if (!(err instanceof RenderError)) throw err;
      this.metrics?.observeRender(elapsed(), false);
      if (previous.renderProblems.length === 0) this.log.warn({ pool: name, problems: err.problems }, 'render failed; the pool keeps its last good config');
      next = { ...previous, renderProblems: err.problems, renderedInputs: inputs, renderedRevision: revision };
    }
    // The status goes with the new target (below), so a reader never sees a target without its counts.
    // What this render decided; the rest of the record (the rollout's bookkeeping) is whatever
    // the record holds when it is written.
    const rendered = { target: next.target, targetSources: next.targetSources, renderProblems: next.renderProblems, renderedInputs: inputs, renderedRevision: revision };
    let record = current;
    for (let attempt = 1; ; attempt++) {
      const value: PoolStatusRecord = { ...(record?.value ?? next), ...rendered };
      const status = poolStatusFor(this.cache, name, value, this.clock.now());
      if (status) value.status = status;
      const target: WriteOp = {
        type: 'put', kind: 'PoolStatus', name, value,
        expectedVersion: record?.resourceVersion ?? null, ...(record ? { createdAt: record.createdAt } : {}),
      };
      // One commit (one fsync, one round trip) when both fit in a request; a rendered config
      // near the limit goes first on its own, which is as safe: a target never names a missing
      // config.
      if (newRendered && opBytes(newRendered) + opBytes(target) + RENDERED_SIZE_HEADROOM > STORE_LIMITS.maxRequestBytes) {
        await this.writer.commit([newRendered], signal);
        newRendered = undefined;
      }
      try {
        await this.writer.commit(newRendered ? [newRendered, target] : [target], signal);
        break;
      } catch (err) {
        // Rollout and pool status write this record too, often during a rollout: merge into
        // their newer write rather than render again (a render is the expensive part).
        if (!(err instanceof ConflictError) || attempt >= RECORD_CONFLICT_ATTEMPTS) throw err;
        record = await this.cache.store.get('PoolStatus', name);
      }
    }
    await this.collectGarbage(name, signal);
  }

  /** Deletes `pool`'s rendered configs beyond the newest few, except those something still names. */
  async collectGarbage(pool: string, signal?: AbortSignal): Promise<void> {
    const keep = new Set(referencedConfigs(this.cache).keys());
    const list = [...this.cache.rendered.values()]
      .filter((o) => o.value.pool === pool)
      .sort((a, b) => b.createdAt - a.createdAt || (a.name < b.name ? 1 : -1));
    for (const r of list.slice(0, RENDERED_HISTORY)) keep.add(r.name);
    const ops: WriteOp[] = list
      .filter((o) => !keep.has(o.name))
      .map((o) => ({ type: 'delete', kind: 'RenderedConfig', name: o.name, expectedVersion: o.resourceVersion }));
    if (ops.length) {
      this.log.info({ pool, deleted: ops.map((o) => o.name) }, 'deleted unreferenced rendered configs');
      await this.writer.commitEach(ops, signal);
    }
  }
}

/**
 * The write that stores a rendered config. Its text is made around the spec's text that the
 * render made and hashed (specJson), so the size checks and the store take that text rather than
 * serializing megabytes again; it is the text JSON.stringify gives for the value, byte for byte.
 */
export function renderedConfigPut(rendered: RenderedConfig): PutOp {
  const { name, pool, hash, spec, sources } = rendered;
  const value: StoredRendered = { name, pool, hash, spec, sources };
  const json = `${JSON.stringify({ name, pool, hash }).slice(0, -1)},"spec":${rendered.specJson},"sources":${JSON.stringify(sources)}}`;
  return { type: 'put', kind: 'RenderedConfig', name, value, json };
}

/**
 * A rendered config is one object in the store, so it must fit in one request (etcd's 1.5 MiB,
 * which the SQLite store applies too). Too big is a render failure that names the cause and the
 * way out, not a write that fails on every retry.
 */
function checkRenderedSize(pool: string, op: WriteOp): void {
  const bytes = opBytes(op);
  const limit = STORE_LIMITS.maxRequestBytes - RENDERED_SIZE_HEADROOM;
  if (bytes <= limit) return;
  throw new RenderError(pool, [{
    object: `MachineConfigPool/${pool}`, field: 'status.configuration', rule: 'rendered-size',
    message: `the rendered config would be ${bytes} bytes; one stored object may be at most ${limit} bytes (etcd's request limit): move large file contents out of MachineConfigs (into the OS image, or fetched by a unit) or split them over pools`,
  }]);
}

/** Tries at writing a pool's record over other lanes' newer writes before the reconcile is retried whole. */
const RECORD_CONFLICT_ATTEMPTS = 5;

/** Room in a request for the leader's fencing check and the envelope around the object. */
const RENDERED_SIZE_HEADROOM = 4096;
