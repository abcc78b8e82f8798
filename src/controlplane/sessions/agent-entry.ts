// Where an agent's stream enters the control plane: register, report, renew a certificate,
// disconnect. What an agent sends is trusted to say who it is (its certificate, checked by the
// service), not to be well-formed: every status is admitted here (admitNodeStatus), once.

import { admitNodeStatus, type NodeStatus } from '../../machineconfig/index.ts';
import type { CertificateBinding } from '../../runtime/pki.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import { poolFor } from '../cache/pool-for-node.ts';
import type { PhaseTracker } from '../metrics/phase-tracker.ts';
import type { AgentSessions, AgentStream, LocalSession } from './agent-sessions.ts';
import type { AssignmentDispatcher } from './assignment-dispatcher.ts';

export interface NodeRegistration {
  nodeName: string;
  labels: Record<string, string>;
  /** The pool the node's credential binds it to; absent in plaintext development mode. */
  boundPool?: string;
  /** The client certificate the stream was opened with; absent in plaintext mode. */
  certificate?: CertificateBinding;
  /** The same certificate's DER (which CA issued it). */
  certificateDer?: Buffer;
  bootId: string;
  agentVersion: string;
  status: NodeStatus;
}

export class AgentEntry {
  readonly #cache: ClusterCache;
  readonly #sessions: AgentSessions;
  readonly #dispatcher: AssignmentDispatcher;
  /** Update phases timed from the reports of the streams this replica holds. */
  readonly #phases: PhaseTracker;

  private readonly log: Logger;
  constructor(cache: ClusterCache, sessions: AgentSessions, dispatcher: AssignmentDispatcher, phases: PhaseTracker, log: Logger) {
    this.log = log;
    this.#cache = cache;
    this.#sessions = sessions;
    this.#dispatcher = dispatcher;
    this.#phases = phases;
  }

  async registerNode(reg: NodeRegistration, stream: AgentStream): Promise<LocalSession> {
    const status = admitNodeStatus(reg.status);
    const isNew = !this.#cache.nodeRecords.has(reg.nodeName);
    const session = await this.#sessions.open({ nodeName: reg.nodeName, labels: reg.labels, ...(reg.boundPool ? { boundPool: reg.boundPool } : {}), ...(reg.certificate ? { certificate: reg.certificate } : {}), ...(reg.certificateDer ? { certificateDer: reg.certificateDer } : {}), bootId: reg.bootId, status }, stream);
    // The leader decides the pool; the answer here is the same rule applied to what this
    // replica sees now, for the agent's log.
    const membership = poolFor(this.#cache, reg.nodeName, this.#cache.nodes.get(reg.nodeName)?.poolLabels ?? {});
    this.log.info({ node: reg.nodeName, pool: membership.pool || undefined, poolError: membership.poolError, bootId: reg.bootId, current: status.currentConfig || undefined, new: isNew }, 'node registered');
    this.#phases.report(reg.nodeName, status, true);
    stream.write({ registered: { pool: membership.pool } });
    this.#dispatcher.sendAssignment(session, true);
    await this.#dispatcher.deliverReapply(session);
    await this.#dispatcher.deliverTryConfirmation(session);
    return session;
  }

  reportStatus(nodeName: string, status: NodeStatus): void {
    const clean = admitNodeStatus(status);
    // Timed only while this replica holds the node's stream (as the report is stored only then).
    if (this.#sessions.get(nodeName)) this.#phases.report(nodeName, clean, true);
    this.#sessions.report(nodeName, clean);
  }

  /** Signs a new certificate for the node on this stream (the agent renews at 2/3 of a life). */
  renewCertificate(node: string, stream: AgentStream, presented: CertificateBinding, pool: string, csrPem: string): Promise<{ certificatePem: string; caBundlePem: string }> {
    return this.#sessions.renew(node, stream, presented, pool, csrPem);
  }

  async disconnect(nodeName: string, stream: AgentStream): Promise<void> {
    if (await this.#sessions.close(nodeName, stream)) this.log.info({ node: nodeName }, 'node disconnected');
  }
}
