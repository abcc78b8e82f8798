// The one place assignments are sent from. Every replica runs it for the agent streams it
// holds: when the store says a node's assignment changed, or an operator asked for a re-apply,
// the replica holding the node's stream sends it.
// It sends the assignment as the leader stored it, policies included (the disruption policy the
// drain and the window were decided with, the pool's drift policy and health check): whichever
// replica holds the stream, the node hears the same decision. Controllers only write; this only
// sends.

import { ConflictError } from '../../machineconfig/index.ts';
import type { ServerMessage } from '../../runtime/generated/mcplane/v1/ServerMessage.ts';
import type { Logger } from '../../runtime/logger.ts';
import { preEncode, type PreEncoded } from '../../runtime/pre-encoded.ts';
import { loadMcplaneProto } from '../../runtime/proto.ts';
import type { AgentSessions, LocalSession } from './agent-sessions.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import { agentPolicyFor, disruptionPolicyJsonFor, lifecycleHooksJsonFor } from '../cache/node-update-plan.ts';
import { pinnedImageSetsFor } from '../cache/pinned-image-sets-for.ts';
import type { NodeAssignmentRecord } from '../store/stored-records.ts';

/**
 * Sessions a change sends to before the rest wait for the next turn of the event loop: a fan-out
 * to thousands of streams in one go held status reads (and every other call) for as long.
 */
const FAN_OUT_SLICE = 200;
/** Distinct assignments kept encoded: a few pools, each mid-rollout between two configs. */
const ENCODED_KEPT = 16;
/** The agent feature that says it takes an assignment of pinned image sets alone. */
const PINNED_SETS_ONLY = 'pinned-image-sets-only';

export class AssignmentDispatcher {
  /** Encoded assignments by fingerprint (kept beside them: see sendAssignment), oldest first. */
  readonly #encoded = new Map<string, { fingerprint: string; encoded: PreEncoded }>();
  /**
   * Each pool's hooks for a rendered config, as the assignment carries them ("pool\0config" ->
   * JSON). Made from the pool's spec and every source's annotation: a pass over all of a
   * config's sources (1,000 and more) that every send repeated, the same for every node of the
   * pool. Emptied whenever a pool or a MachineConfig changes (#onChange, before any send).
   */
  readonly #hooksJson = new Map<string, string>();

  private readonly cache: ClusterCache;
  private readonly sessions: AgentSessions;
  private readonly log: Logger;
  constructor(cache: ClusterCache, sessions: AgentSessions, log: Logger) {
    this.cache = cache;
    this.sessions = sessions;
    this.log = log;
    cache.on('change', (change) => this.#onChange(change));
  }

  /**
   * The node's assignment as a message, or undefined when it has none yet: the stored record as
   * the leader decided it, with the rendered config it names.
   */
  assignmentFor(node: string): ServerMessage | undefined {
    const assignment = this.cache.assignments.get(node)?.value;
    // Held: the leader drains the node first; the agent keeps what it runs until then. Its pool's
    // pinned image sets still reach it (pulling disrupts nothing), where the agent takes them alone.
    if (assignment?.desiredConfig && assignment.holdForDrain) return this.#pinnedSetsOnly(node, assignment.desiredConfig);
    if (!assignment?.desiredConfig) return undefined;
    const desired = assignment.desiredConfig;
    const rendered = this.cache.renderedConfig(desired);
    if (!rendered) return undefined; // its watch event is on its way; the change sends it
    // Records written by an older leader lack the policies: the live ones go until the leader
    // fills them in (a pass of its rollout controller; see NodeAssignmentRecord).
    const live = isLegacy(assignment) ? agentPolicyFor(this.cache, rendered.pool, rendered.name) : undefined;
    return {
      assignment: {
        renderedConfig: rendered.name,
        specJson: rendered.specJson,
        pool: rendered.pool,
        disruptionPolicyJson: assignment.disruptionPolicyJson ?? disruptionPolicyJsonFor(this.cache, rendered.pool),
        driftPolicy: assignment.driftPolicy ?? live!.driftPolicy,
        healthCheckJson: assignment.healthCheckJson ?? live!.healthCheckJson,
        pinnedImageSets: pinnedImageSetsFor(this.cache, rendered.pool),
        pinnedImageSetsSent: true,
        driftIgnore: (live ? live.driftIgnore : assignment.driftIgnore) ?? [],
        ...this.#stageOf(assignment),
        tryJson: assignment.tryJson ?? (live ?? agentPolicyFor(this.cache, rendered.pool, rendered.name)).tryJson,
        // Live, as the pinned image sets: the pool's hooks and its configs' annotations as they stand.
        hooksJson: this.#hooksJsonFor(rendered.pool, rendered),
      },
    };
  }

  #hooksJsonFor(pool: string, rendered: { name: string; sources: readonly string[] }): string {
    const key = `${pool}\0${rendered.name}`;
    let json = this.#hooksJson.get(key);
    if (json === undefined) {
      json = lifecycleHooksJsonFor(this.cache, pool, rendered);
      this.#hooksJson.set(key, json);
    }
    return json;
  }

  /**
   * The pool's pinned image sets alone, for a node held for its drain whose agent takes them so
   * (an older agent would read the empty config as a malformed assignment: it gets nothing).
   */
  #pinnedSetsOnly(node: string, desired: string): ServerMessage | undefined {
    if (!this.cache.nodeStatuses.get(node)?.value.status.agentFeatures?.includes(PINNED_SETS_ONLY)) return undefined;
    const pool = this.cache.renderedConfig(desired)?.pool;
    if (!pool) return undefined;
    return { assignment: { pool, pinnedImageSets: pinnedImageSetsFor(this.cache, pool), pinnedImageSetsSent: true, pinnedImageSetsOnly: true } };
  }

  /** The config to stage, with its spec, when the leader picked the node to download ahead. */
  #stageOf(assignment: NodeAssignmentRecord): { stageConfig?: string; stageSpecJson?: string } {
    if (!assignment.stageConfig || assignment.stageConfig === assignment.desiredConfig) return {};
    const staged = this.cache.renderedConfig(assignment.stageConfig);
    return staged ? { stageConfig: staged.name, stageSpecJson: staged.specJson } : {};
  }

  /** Sends the node's assignment if it differs from what its stream last got (or always). */
  sendAssignment(session: LocalSession, always = false): void {
    const message = this.assignmentFor(session.node);
    if (!message?.assignment) return;
    const { renderedConfig, disruptionPolicyJson, driftPolicy, healthCheckJson, pinnedImageSets, driftIgnore, stageConfig, tryJson, pinnedImageSetsOnly, hooksJson } = message.assignment;
    const fingerprint = `${pinnedImageSetsOnly ? 'sets only\n' : ''}${renderedConfig}\n${disruptionPolicyJson}\n${driftPolicy}\n${healthCheckJson ?? ''}\n${(pinnedImageSets ?? []).map((p) => `${p.name}@${p.generation}`).join(',')}\n${(driftIgnore ?? []).join('\0')}\n${stageConfig ?? ''}\n${tryJson ?? ''}\n${hooksJson ?? ''}`;
    if (!always && session.lastAssignment === fingerprint) return;
    const kept = this.#encode(fingerprint, message);
    // The kept fingerprint: every session of a pool shares one string instead of holding a copy.
    session.lastAssignment = kept.fingerprint;
    session.stream.write(kept.encoded);
  }

  /** The assignment's wire bytes, encoded once for every stream it goes to. */
  #encode(fingerprint: string, message: ServerMessage): { fingerprint: string; encoded: PreEncoded } {
    let kept = this.#encoded.get(fingerprint);
    if (!kept) {
      kept = { fingerprint, encoded: preEncode(loadMcplaneProto().grpc.mcplane.v1.AgentService.service.Connect, message) };
      this.#encoded.set(fingerprint, kept);
      if (this.#encoded.size > ENCODED_KEPT) this.#encoded.delete(this.#encoded.keys().next().value!);
    }
    return kept;
  }

  /** Delivers a pending re-apply request to the node's stream, then removes it. */
  async deliverReapply(session: LocalSession): Promise<void> {
    const request = this.cache.reapplyRequests.get(session.node);
    if (!request) return;
    session.stream.write({ command: { forceReapply: { requestedBy: request.value.requestedBy } } });
    this.log.info({ node: session.node, requestedBy: request.value.requestedBy }, 'forced re-apply sent');
    await this.cache.store.commit([{ type: 'delete', kind: 'ReapplyRequest', name: session.node, expectedVersion: request.resourceVersion }])
      .catch((err: unknown) => {
        if (!(err instanceof ConflictError)) this.log.warn({ err, node: session.node }, 'could not remove the delivered re-apply request');
      });
  }

  /** Delivers a pending try confirmation (mcctl confirm) to the node's stream, then removes it. */
  async deliverTryConfirmation(session: LocalSession): Promise<void> {
    const request = this.cache.tryConfirmations.get(session.node);
    if (!request) return;
    session.stream.write({ command: { confirmTry: { config: request.value.config, requestedBy: request.value.requestedBy } } });
    this.log.info({ node: session.node, config: request.value.config, requestedBy: request.value.requestedBy }, 'try confirmation sent');
    await this.cache.store.commit([{ type: 'delete', kind: 'TryConfirmation', name: session.node, expectedVersion: request.resourceVersion }])
      .catch((err: unknown) => {
        if (!(err instanceof ConflictError)) this.log.warn({ err, node: session.node }, 'could not remove the delivered try confirmation');
      });
  }

  /** Sends to `nodes` a slice per turn of the event loop, each as the cache stands then. */
  #sendInSlices(nodes: string[], from = 0): void {
    const end = Math.min(nodes.length, from + FAN_OUT_SLICE);
    for (let i = from; i < end; i++) {
      const session = this.sessions.get(nodes[i]!);
      if (session) this.sendAssignment(session);
    }
    if (end < nodes.length) setImmediate(() => this.#sendInSlices(nodes, end));
  }

  #onChange(change: CacheChange): void {
    // First, whether or not this replica holds streams: the hooks come from pools and configs.
    if (change.resync || change.changed.has('MachineConfigPool') || change.changed.has('MachineConfig')) this.#hooksJson.clear();
    if (this.sessions.size === 0) return;
    const check = new Set<string>();
    if (change.resync || change.changed.has('RenderedConfig')) {
      // A config whose event trails its assignments' (another replica's leader wrote both).
      for (const s of this.sessions.local()) check.add(s.node);
    } else {
      for (const node of change.changed.get('NodeAssignment') ?? []) check.add(node);
      // The live policies reach only records an older leader wrote; the others hear of a
      // policy change through their own record, rewritten by the leader.
      // Pinned image sets follow the pool's spec and the sets at once, whatever the rollout does:
      // every stream hears of a change (the fingerprint leaves out those it does not touch).
      // Lifecycle hooks too: a pool's spec.hooks or a config's mcplane.io/hooks annotation.
      if (change.changed.has('PinnedImageSet') || change.changed.has('MachineConfigPool') || change.changed.has('MachineConfig')) {
        for (const s of this.sessions.local()) check.add(s.node);
      }
      if (change.changed.has('MachineConfigPool') || change.changed.has('MachineConfiguration')) {
        for (const s of this.sessions.local()) {
          const a = this.cache.assignments.get(s.node)?.value;
          if (a && isLegacy(a)) check.add(s.node);
        }
      }
    }
    this.#sendInSlices([...check]);
    for (const node of change.changed.get('ReapplyRequest') ?? []) {
      const session = this.sessions.get(node);
      if (session) void this.deliverReapply(session);
    }
    for (const node of change.changed.get('TryConfirmation') ?? []) {
      const session = this.sessions.get(node);
      if (session) void this.deliverTryConfirmation(session);
    }
  }
}

/** A record from before the leader stored every policy with the assignment. */
function isLegacy(a: NodeAssignmentRecord): boolean {
  return a.disruptionPolicyJson === undefined || a.driftPolicy === undefined || a.healthCheckJson === undefined;
}
