// mcctl pki token create and mcctl node revoke: who may join a pool, and who may stay.

import { ConfigurationError, durationMs } from '../../machineconfig/index.ts';
import { call } from '../client/call.ts';
import type { Clients } from '../client/connection.ts';

/**
 * Makes a bootstrap token for one pool. Only the token goes to stdout (it is shown this once),
 * so `TOKEN=$(mcctl pki token create --pool worker)` works; what it is goes to stderr.
 */
export async function tokenCreateCommand(c: Clients, opts: { pool: string; ttl?: string; description?: string }, err: (text: string) => void): Promise<string> {
  const ttlMs = opts.ttl === undefined ? 0 : durationMs(opts.ttl);
  if (ttlMs === undefined || (opts.ttl !== undefined && ttlMs <= 0)) {
    throw new ConfigurationError(`--ttl ${opts.ttl}: give a duration longer than 0 such as 24h, 7d or 1h30m (omit it for a token valid until deleted)`);
  }
  const created = await call(c, c.identity.createBootstrapToken.bind(c.identity), { pool: opts.pool, ttlMs, description: opts.description ?? '' }, `create a bootstrap token for pool ${opts.pool}`);
  const expires = Number(created.info?.expiresUnixMs ?? 0);
  err(`bootstrap token ${created.info?.id} for pool ${opts.pool}, ${expires ? `valid until ${new Date(expires).toISOString()}` : 'valid until deleted (mcctl delete token ' + created.info?.id + ')'}; it is shown only now:\n`);
  return `${created.token}\n`;
}

export async function revokeCommand(c: Clients, name: string): Promise<string> {
  const { serial, generation } = await call(c, c.identity.revokeNode.bind(c.identity), { name }, `revoke node ${name}`);
  return `node/${name}: certificate ${serial} revoked, and every certificate issued for ${name} before generation ${generation}; its agent is disconnected and refused on every replica (enroll the host again, or mcctl pki node ${name} --generation ${generation}, to bind it again)\n`;
}

/** `mcctl approve enrollment NAME`: NAME is the node name of one pending request, or its id. */
export async function approveEnrollmentCommand(c: Clients, resource: string, name: string): Promise<string> {
  enrollmentResource(resource, 'approve');
  const r = await call(c, c.identity.approveEnrollmentRequest.bind(c.identity), { name }, `approve enrollment request ${name}`);
  const signed = r.certificateSerial ? `certificate ${r.certificateSerial} issued` : 'the certificate is signed by the bootstrap endpoint when the host next polls';
  return `enrollmentrequest/${r.id.slice(0, 16)} approved: node ${r.nodeName} joins pool ${r.pool} (${signed}); its agent gets the pool's config once it connects\n`;
}

export async function denyEnrollmentCommand(c: Clients, resource: string, name: string, reason: string | undefined): Promise<string> {
  enrollmentResource(resource, 'deny');
  const r = await call(c, c.identity.denyEnrollmentRequest.bind(c.identity), { name, reason: reason ?? '' }, `deny enrollment request ${name}`);
  return `enrollmentrequest/${r.id.slice(0, 16)} denied: node ${r.nodeName} (from ${r.address}) does not join pool ${r.pool}; the host is told: ${r.reason}\n`;
}

function enrollmentResource(resource: string, verb: string): void {
  if (!/^(enrollments?|enrollmentrequests?|er)$/i.test(resource)) {
    throw new ConfigurationError(`mcctl ${verb} works on enrollment requests (mcctl ${verb} enrollment NAME), not "${resource}"`);
  }
}
