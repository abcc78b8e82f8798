// The open agent streams, one per node. A node that reconnects replaces its old stream (the old
// one may not have noticed the network is gone yet); messages go only to the stream that
// authenticated as that node.

import type { ServerMessage } from '../runtime/generated/mcplane/v1/ServerMessage.ts';
import type { ClusterState } from './cluster-state.ts';
import type { Logger } from '../runtime/logger.ts';

export interface AgentStream {
  write(message: ServerMessage): boolean;
  end(): void;
}

export class AgentSessions {
  readonly #streams = new Map<string, AgentStream>();

  constructor(private readonly state: ClusterState, private readonly log: Logger) {}

  get size(): number {
    return this.#streams.size;
  }

  isConnected(node: string): boolean {
    return this.#streams.has(node);
  }

  attach(node: string, stream: AgentStream): void {
    const previous = this.#streams.get(node);
    if (previous && previous !== stream) {
      this.log.info({ node }, 'node reconnected; closing its previous stream');
      previous.end();
    }
    this.#streams.set(node, stream);
  }

  /** Returns true when `stream` was the node's current stream. */
  detach(node: string, stream: AgentStream): boolean {
    if (this.#streams.get(node) !== stream) return false;
    this.#streams.delete(node);
    return true;
  }

  send(node: string, message: ServerMessage): boolean {
    const stream = this.#streams.get(node);
    if (!stream) return false;
    stream.write(message);
    return true;
  }

  /** Sends the node's desired config with everything needed to apply it. */
  sendAssignment(node: string): boolean {
    const message = this.assignmentFor(node);
    return message ? this.send(node, message) : false;
  }

  assignmentFor(node: string): ServerMessage | undefined {
    const entry = this.state.nodes.get(node);
    if (!entry?.desiredConfig) return undefined;
    const rendered = this.state.renderedConfig(entry.desiredConfig);
    if (!rendered) {
      this.log.error({ node, config: entry.desiredConfig }, 'desired config missing from the store');
      return undefined;
    }
    const pool = this.state.pools.get(rendered.pool)?.value.pool;
    return {
      assignment: {
        renderedConfig: rendered.name,
        specJson: rendered.specJson,
        pool: rendered.pool,
        disruptionPolicyJson: pool?.spec.disruptionPolicy ? JSON.stringify(pool.spec.disruptionPolicy) : '',
        driftPolicy: pool?.spec.driftPolicy ?? 'Degrade',
      },
    };
  }

  closeAll(): void {
    for (const stream of this.#streams.values()) stream.end();
    this.#streams.clear();
  }
}
