// What the API layer needs from the replica it serves, one interface per use, so that each
// service's signature says what it reads and which commands it may run. Before these, every
// service took the whole ControlPlane and reached through it (`cp.cache`, `cp.store`,
// `cp.sessions`), which hid what a service depended on and let any of them call anything.
// server.ts, the composition root, hands each service its parts: the ControlPlane's cache and
// store, its `serving` and `agents`, and the commands it builds over the cache (the ControlPlane
// does not import this file). ServingReplica is declared beside the ControlPlane, whose
// `serving` is one.

import type { ClusterCache } from '../cache/cluster-cache.ts';
import type { ServingReplica } from '../control-plane.ts';
import type { AgentEntry as AgentEntryClass } from '../sessions/agent-entry.ts';
import type { ConfigCommands as ConfigCommandsClass } from './config-commands.ts';
import type { Store } from '../store/store.ts';
import type { CertificateSigner } from './enrollment-requests.ts';
import type { AuditTrail } from './audit-trail.ts';

export type { ServingReplica };

/** The cache every read is answered from, and the store for what the cache does not hold. */
export interface ApiReads {
  readonly cache: ClusterCache;
  readonly store: Store;
}

/** The agent stream's entry: register, report, renew a certificate, disconnect. */
export type AgentEntry = Pick<AgentEntryClass, 'registerNode' | 'reportStatus' | 'renewCertificate' | 'disconnect'>;

/** The operator's config commands (ConfigService). */
export type ConfigCommands = Pick<ConfigCommandsClass, 'apply' | 'delete' | 'setPoolPaused' | 'labelNode' | 'reapplyNode' | 'confirmTry'>;

/** The operator's identity commands (IdentityService), and the CA key approvals sign with. */
export type IdentityCommands = Pick<ConfigCommandsClass, 'revokeNode'> & {
  /** Present on replicas that hold the CA key; the others cannot approve enrollment requests. */
  readonly certificateSigner: CertificateSigner | undefined;
};

/** Everything the gRPC services take, assembled once by server.ts. */
export interface ApiAccess {
  reads: ApiReads;
  replica: ServingReplica;
  agents: AgentEntry;
  config: ConfigCommands;
  identity: IdentityCommands;
  /** Where every write through the API, and every refused one, is recorded. */
  audit: AuditTrail;
}
