// Wraps a service's handlers with its access table (access-rules.ts): each call is checked
// against its RPC's rule before its handler runs, and every call of a writing RPC, allowed or
// refused, is written to the audit trail before the caller gets its answer. The handlers
// themselves check nothing: one place decides who may call what.

import { status as Status, type ServiceError } from '@grpc/grpc-js';
import { PermissionDeniedError } from '../../machineconfig/index.ts';
import { ROLE_ORGANIZATIONS, ROLE_RANK, type ApiCaller } from '../../runtime/api-roles.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import type { Rule, WriteRule } from './access-rules.ts';
import type { AuditTrail } from './audit-trail.ts';
import type { Authorizer } from './authorization.ts';
import { toServiceError } from './status-errors.ts';

export interface GuardContext {
  auth: Authorizer;
  cache: ClusterCache;
  /** Where writes are recorded; a service without writing RPCs (the status thread's) has none. */
  audit: AuditTrail | undefined;
  log: Logger;
}

const API_ORGANIZATIONS = `O=${ROLE_ORGANIZATIONS.admin}, O=${ROLE_ORGANIZATIONS.operator} or O=${ROLE_ORGANIZATIONS.viewer}`;

/** Throws PermissionDeniedError unless `caller` may make this call. */
export function checkAccess(caller: ApiCaller, method: string, rule: Rule, request: unknown, cache: ClusterCache): void {
  if (!caller.role) {
    throw new PermissionDeniedError(`certificate CN=${caller.commonName || '<none>'}, O=${caller.organization || '<none>'} may not use this service: it needs O=${ROLE_ORGANIZATIONS.admin} (or ${API_ORGANIZATIONS} for what those roles may do; operator credentials are distinct from node credentials)`);
  }
  if (ROLE_RANK[caller.role] < ROLE_RANK[rule.role]) {
    throw new PermissionDeniedError(`certificate ${caller.subject} is a ${caller.role}: ${method} needs the ${rule.role} role (O=${ROLE_ORGANIZATIONS[rule.role]})`);
  }
  if (caller.role !== 'operator' || caller.pools.length === 0 || rule.role !== 'operator') return;
  const touched = rule.pools?.(request as never, cache);
  const scope = `certificate ${caller.subject} may act on pool${caller.pools.length > 1 ? 's' : ''} ${caller.pools.join(', ')} only`;
  if (!touched) throw new PermissionDeniedError(`${scope}, and the pool ${method} would touch cannot be told (no such object, or its new labels select no single pool)`);
  const outside = [...new Set(touched.filter((p) => !caller.pools.includes(p)))];
  if (outside.length) throw new PermissionDeniedError(`${scope}: ${method} touches pool ${outside.join(', ')}`);
}

type Callback = (err: Partial<ServiceError> | null, value?: unknown) => void;
interface AnyCall {
  request?: unknown;
  getPeer(): string;
  emit(event: 'error', err: unknown): boolean;
  getAuthContext?: () => { sslPeerCertificate?: { raw?: Buffer } } | null;
}

/** `handlers` with each call checked against `rules` and each write audited. */
export function guarded<H extends object>(service: string, handlers: H, rules: { readonly [K in keyof H]: Rule }, cx: GuardContext): H {
  const wrapped: Record<string, unknown> = {};
  for (const [name, handler] of Object.entries(handlers) as [keyof H & string, (call: AnyCall, callback?: Callback) => void][]) {
    const rule = rules[name];
    const method = `${service}/${name}`;
    wrapped[name] = (call: AnyCall, callback?: Callback): void => {
      let caller: ApiCaller | undefined;
      const answer = (err: Partial<ServiceError>): void => {
        if (callback) callback(err);
        else call.emit('error', err);
      };
      try {
        caller = cx.auth.caller(call);
        checkAccess(caller, method, rule, call.request, cx.cache);
      } catch (err) {
        const serviceError = toServiceError(err, cx.log);
        if (rule.role === 'viewer') answer(serviceError);
        else void audit(cx, caller, call, method, rule, serviceError, undefined).then(() => answer(serviceError));
        return;
      }
      if (rule.role === 'viewer' || !callback) {
        handler(call, callback);
        return;
      }
      handler(call, (err, value) => {
        void audit(cx, caller, call, method, rule, err, value).then(() => callback(err, value));
      });
    };
  }
  return wrapped as H;
}

async function audit(cx: GuardContext, caller: ApiCaller | undefined, call: AnyCall, method: string, rule: WriteRule, err: Partial<ServiceError> | null, value: unknown): Promise<void> {
  if (!cx.audit) return;
  let objects: { kind: string; name: string }[] = [];
  try {
    objects = rule.objects(call.request as never, (err ? undefined : value) as never);
  } catch {
    // A request too malformed to name its objects is recorded without them.
  }
  const dryRun = (call.request as { dryRun?: boolean } | undefined)?.dryRun === true;
  await cx.audit.record({
    subject: caller?.subject ?? '<no certificate>',
    serial: caller?.serial ?? '',
    role: caller?.role ?? 'none',
    pools: caller?.pools ?? [],
    peer: call.getPeer(),
    method,
    objects,
    result: err ? (Status[err.code ?? Status.UNKNOWN] ?? String(err.code)) : 'OK',
    ...(err ? { message: err.details ?? '' } : dryRun ? { message: 'dry run: nothing stored' } : {}),
  });
}
