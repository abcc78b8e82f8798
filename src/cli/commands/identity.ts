// mcctl pki token create and mcctl node revoke: who may join a pool, and who may stay.

import { BlockList, isIP } from 'node:net';
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

export async function denyEnrollmentCommand(c: Clients, resource: string, name: string | undefined, opts: { reason?: string; allPending?: boolean; from?: string }): Promise<string> {
  enrollmentResource(resource, 'deny');
  if (opts.allPending) {
    if (name !== undefined) throw new ConfigurationError('mcctl deny enrollment --all-pending takes no NAME: it denies every pending request (narrow it with --from CIDR)');
    return denyAllPending(c, opts.reason, opts.from);
  }
  if (opts.from !== undefined) throw new ConfigurationError('--from CIDR goes with --all-pending: mcctl deny enrollment --all-pending --from CIDR');
  if (name === undefined) throw new ConfigurationError('mcctl deny enrollment needs NAME (a node name or a request ID), or --all-pending');
  const r = await call(c, c.identity.denyEnrollmentRequest.bind(c.identity), { name, reason: opts.reason ?? '' }, `deny enrollment request ${name}`);
  return `enrollmentrequest/${r.id.slice(0, 16)} denied: node ${r.nodeName} (from ${r.address}) does not join pool ${r.pool}; the host is told: ${r.reason}\n`;
}

/**
 * The remedy for a flood: every pending request (from one network with --from) denied by its id,
 * a few at a time. Requests decided or expired meanwhile are skipped, not errors.
 */
async function denyAllPending(c: Clients, reason: string | undefined, from: string | undefined): Promise<string> {
  const inRange = from === undefined ? () => true : cidrMatcher(from);
  const { requests } = await call(c, c.identity.listEnrollmentRequests.bind(c.identity), {}, 'list enrollment requests');
  const chosen = requests.filter((r) => r.state === 'Pending' && inRange(r.address));
  let denied = 0;
  let skipped = 0;
  const queue = [...chosen];
  const worker = async (): Promise<void> => {
    for (let r = queue.shift(); r; r = queue.shift()) {
      try {
        await call(c, c.identity.denyEnrollmentRequest.bind(c.identity), { name: r.id, reason: reason ?? '' }, `deny enrollment request ${r.id.slice(0, 16)}`);
        denied++;
      } catch (err) {
        // Decided by someone else, or expired, since the list: nothing left to deny.
        if (!/already (approved|denied)|not found|NOT_FOUND|does not exist/i.test((err as Error).message)) throw err;
        skipped++;
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  const where = from === undefined ? '' : ` from ${from}`;
  return `${denied} pending enrollment request${denied === 1 ? '' : 's'}${where} denied${skipped ? ` (${skipped} decided or expired meanwhile)` : ''}\n`;
}

/** A test of client addresses against an IPv4 or IPv6 CIDR (an IPv4-mapped address counts as IPv4). */
function cidrMatcher(cidr: string): (address: string) => boolean {
  const m = /^([^/]+)\/(\d{1,3})$/.exec(cidr.trim());
  const family = m ? isIP(m[1]!) : 0;
  const prefix = m ? Number(m[2]) : NaN;
  if (!m || family === 0 || prefix > (family === 4 ? 32 : 128)) {
    throw new ConfigurationError(`--from ${cidr}: expected a CIDR such as 192.0.2.0/24 or 2001:db8::/64`);
  }
  const list = new BlockList();
  list.addSubnet(m[1]!, prefix, family === 4 ? 'ipv4' : 'ipv6');
  return (address) => {
    const a = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
    const f = isIP(a);
    return f !== 0 && list.check(a, f === 4 ? 'ipv4' : 'ipv6');
  };
}

function enrollmentResource(resource: string, verb: string): void {
  if (!/^(enrollments?|enrollmentrequests?|er)$/i.test(resource)) {
    throw new ConfigurationError(`mcctl ${verb} works on enrollment requests (mcctl ${verb} enrollment NAME), not "${resource}"`);
  }
}
