// Who may call each RPC, in one table per service, each typed by its service's handlers: an RPC
// added to a .proto without a rule here is a compile error (and test/controlplane/api-roles.test.ts
// compares these keys with the loaded proto's methods). The agent's service is not here: it is
// node-only (authorization.ts' requireNode).
//
// A viewer rule is a read. Every rule above viewer is a write, and every write is audited
// (guarded-service.ts), refusals included, with the objects `objects` names.
//
// Pool scope: an operator whose certificate names pools (OU) may act only where each pool the
// call touches is one of them:
//   SetPoolPaused            the pool named
//   ReapplyNode              the node's pool
//   ConfirmTry               the pool named, or the node's pool
//   LabelNode                the node's pool now AND the pool its new labels select (a scoped
//                            operator cannot move a node into, or out of, another pool)
//   Approve/DenyEnrollment   the pool the request asks to join
// A call whose pool cannot be told (an unknown node, request or pool) is refused to a scoped
// operator; an unscoped one gets the handler's answer (NOT_FOUND). Apply and Delete are admin
// only: one manifest can hold pools and MachineConfigs, and a MachineConfig's role label can
// select several pools (a custom pool selects worker's configs too), so no pool scope is sound.

import type { ConfigServiceHandlers } from '../../runtime/generated/mcplane/v1/ConfigService.ts';
import type { IdentityServiceHandlers } from '../../runtime/generated/mcplane/v1/IdentityService.ts';
import type { StatusServiceHandlers } from '../../runtime/generated/mcplane/v1/StatusService.ts';
import type { ApiRole } from '../../runtime/api-roles.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import { poolFor } from '../cache/pool-for-node.ts';
import { findEnrollmentRequest } from './enrollment-requests.ts';

export interface AuditObject {
  kind: string;
  name: string;
}

export type Rule =
  | { readonly role: 'viewer' }
  | {
    readonly role: 'operator' | 'admin';
    /** The pools the call touches, for a pool-scoped operator; undefined: cannot be told. */
    pools?(request: never, cache: ClusterCache): string[] | undefined;
    /** What the call writes, for the audit trail; `response` when it succeeded. */
    objects(request: never, response: never): AuditObject[];
  };

export type WriteRule = Exclude<Rule, { role: 'viewer' }>;

const READ: Rule = { role: 'viewer' };

/**
 * The RPC names of a service's handlers: grpc-js' handler interfaces carry a string index
 * signature, which would let a table without some RPC satisfy Record<keyof H, Rule>.
 */
type RpcNames<H> = keyof { [K in keyof H as string extends K ? never : number extends K ? never : K]: H[K] };

const nodePool = (cache: ClusterCache, name: string): string | undefined => cache.nodes.get(name)?.pool || undefined;
const one = (kind: string, name: string): AuditObject[] => [{ kind, name }];

export const STATUS_RULES = {
  ListPools: READ,
  GetPool: READ,
  ListNodes: READ,
  GetNode: READ,
  Watch: READ,
  ListReplicas: READ,
  GetServerInfo: READ,
  ListEvents: READ,
  GetNodeHistory: READ,
  ListMachineConfigNodes: READ,
  GetMachineConfigNode: READ,
  // Content a viewer may read already: the node's version of files a MachineConfig manages,
  // files others may read on the node (drift-content.ts withholds the rest).
  GetDriftProposal: READ,
} as const satisfies Record<RpcNames<StatusServiceHandlers>, Rule>;

export const CONFIG_RULES = {
  Apply: {
    role: 'admin',
    objects: (req: { manifests: { source: string }[] }, res: { objects?: AuditObject[] } | undefined) =>
      res?.objects?.map((o) => ({ kind: o.kind, name: o.name })) ?? req.manifests.map((m) => ({ kind: 'manifest', name: m.source })),
  },
  Delete: { role: 'admin', objects: (req: { kind: string; name: string }) => one(req.kind, req.name) },
  ListMachineConfigs: READ,
  GetMachineConfig: READ,
  ListRenderedConfigs: READ,
  GetRenderedConfig: READ,
  SetPoolPaused: {
    role: 'operator',
    pools: (req: { name: string }) => [req.name],
    objects: (req: { name: string }) => one('MachineConfigPool', req.name),
  },
  ReapplyNode: {
    role: 'operator',
    pools: (req: { name: string }, cache: ClusterCache) => {
      const pool = nodePool(cache, req.name);
      return pool === undefined ? undefined : [pool];
    },
    objects: (req: { name: string }) => one('Node', req.name),
  },
  LabelNode: {
    role: 'operator',
    pools: (req: { name: string; set: Record<string, string>; remove: string[] }, cache: ClusterCache) => {
      const pool = nodePool(cache, req.name);
      const record = cache.nodeRecords.get(req.name);
      if (pool === undefined || !record) return undefined;
      const labels = { ...record.value.labels, ...req.set };
      for (const k of req.remove) delete labels[k];
      const after = poolFor(cache, req.name, labels);
      // A node its new labels leave without a pool (or in two) is moved out of this one: the
      // scoped operator must hold every pool, like any pool it cannot name.
      return after.poolError || !after.pool ? undefined : [pool, after.pool];
    },
    objects: (req: { name: string }) => one('Node', req.name),
  },
  ListSourceObjects: READ,
  GetMachineConfiguration: READ,
  ConfirmTry: {
    role: 'operator',
    pools: (req: { kind: string; name: string }, cache: ClusterCache) => {
      if (req.kind === 'pool') return [req.name];
      const pool = nodePool(cache, req.name);
      return pool === undefined ? undefined : [pool];
    },
    objects: (req: { kind: string; name: string }) => one(req.kind === 'pool' ? 'MachineConfigPool' : 'Node', req.name),
  },
} as const satisfies Record<RpcNames<ConfigServiceHandlers>, Rule>;

const requestPool = (req: { name: string }, cache: ClusterCache): string[] | undefined => {
  try {
    return [findEnrollmentRequest(cache, req.name).value.pool];
  } catch {
    return undefined;
  }
};

export const IDENTITY_RULES = {
  CreateBootstrapToken: {
    role: 'admin',
    objects: (req: { pool: string }, res: { info?: { id: string } } | undefined) => one('BootstrapToken', res?.info?.id ?? `(new, pool ${req.pool})`),
  },
  ListBootstrapTokens: READ,
  DeleteBootstrapToken: { role: 'admin', objects: (req: { id: string }) => one('BootstrapToken', req.id) },
  RevokeNode: { role: 'admin', objects: (req: { name: string }) => one('Node', req.name) },
  ListEnrollmentRequests: READ,
  ApproveEnrollmentRequest: {
    role: 'operator',
    pools: requestPool,
    objects: (req: { name: string }, res: { id?: string; nodeName?: string } | undefined) => one('EnrollmentRequest', res?.id ? `${res.id} (${res.nodeName})` : req.name),
  },
  DenyEnrollmentRequest: {
    role: 'operator',
    pools: requestPool,
    objects: (req: { name: string }, res: { id?: string; nodeName?: string } | undefined) => one('EnrollmentRequest', res?.id ? `${res.id} (${res.nodeName})` : req.name),
  },
  ListAuditRecords: READ,
} as const satisfies Record<RpcNames<IdentityServiceHandlers>, Rule>;

/** Every operator-facing service's table, by its proto service name. */
export const SERVICE_RULES = {
  StatusService: STATUS_RULES,
  ConfigService: CONFIG_RULES,
  IdentityService: IDENTITY_RULES,
} as const;

/** The least role a rule needs. */
export function neededRole(rule: Rule): ApiRole {
  return rule.role;
}
