// mcctl pki init DIR / mcctl pki node NAME / mcctl pki replica NAME: certificates for a first install.

import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { ConfigurationError, MASTER_POOL, WORKER_POOL } from '../../machineconfig/index.ts';
import { createCertificateAuthority, issueCertificate, REPLICA_CN_PREFIX, RESERVED_NODE_NAMES, ROLE_ADMIN, ROLE_NODE, ROLE_REPLICA, type KeyPairPem } from '../../runtime/pki.ts';

function writePair(dir: string, base: string, pair: KeyPairPem): void {
  writeFileSync(join(dir, `${base}.crt`), pair.certPem, { mode: 0o644 });
  writeFileSync(join(dir, `${base}.key`), pair.keyPem, { mode: 0o600 });
  chmodSync(join(dir, `${base}.key`), 0o600);
}

function readCa(dir: string): KeyPairPem {
  try {
    return { certPem: readFileSync(join(dir, 'ca.crt'), 'utf8'), keyPem: readFileSync(join(dir, 'ca.key'), 'utf8') };
  } catch (err) {
    throw new ConfigurationError(`${dir} has no CA (ca.crt, ca.key): run mcctl pki init ${dir} first (${(err as Error).message})`);
  }
}

export async function pkiInitCommand(dir: string, hosts: string[], nodes: string[]): Promise<string> {
  if (existsSync(join(dir, 'ca.key'))) throw new ConfigurationError(`${dir} already holds a CA (ca.key); refusing to overwrite it. Issue more node certificates with: mcctl pki node NAME --pki-dir ${dir}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const ca = await createCertificateAuthority();
  writePair(dir, 'ca', ca);
  const serverHosts = [...new Set(['localhost', '127.0.0.1', '::1', hostname(), ...hosts])];
  writePair(dir, 'server', await issueCertificate(ca, { commonName: 'mcplane-server', hosts: serverHosts, usage: 'server' }));
  writePair(dir, 'admin', await issueCertificate(ca, { commonName: 'admin', organization: ROLE_ADMIN, usage: 'client' }));
  // One token per built-in pool: the token in a worker's pointer config must not fetch master's
  // config (with its secrets). More, for any pool: mcctl pki token create --pool P.
  const token = (): string => randomBytes(32).toString('base64url');
  writeFileSync(join(dir, 'bootstrap-token'), [
    '# Bootstrap tokens for GET /config/<pool>, "<pool>:<token>" a line: each serves its pool only.',
    `${MASTER_POOL}:${token()}`,
    `${WORKER_POOL}:${token()}`,
    '',
  ].join('\n'), { mode: 0o600 });
  const lines = [
    `wrote ${dir}/ca.crt, ca.key           the CA (keep ca.key on the server only)`,
    `wrote ${dir}/server.crt, server.key   for ${serverHosts.join(', ')}`,
    `wrote ${dir}/admin.crt, admin.key     operator credentials (O=${ROLE_ADMIN})`,
    `wrote ${dir}/bootstrap-token          for GET /config/master and /config/worker on the bootstrap endpoint (one token each)`,
  ];
  for (const node of nodes) lines.push(await issueNode(dir, ca, node, WORKER_POOL));
  return lines.join('\n') + '\n';
}

/** A node credential bound to `pool`: the node joins that pool's role and cannot claim another. */
export async function pkiNodeCommand(dir: string, name: string, pool = WORKER_POOL): Promise<string> {
  return (await issueNode(dir, readCa(dir), name, pool)) + '\n';
}

async function issueNode(dir: string, ca: KeyPairPem, name: string, pool: string): Promise<string> {
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name)) throw new ConfigurationError(`node name "${name}" must be a DNS subdomain (lowercase letters, digits, "-", ".")`);
  if (RESERVED_NODE_NAMES.has(name)) throw new ConfigurationError(`node name "${name}" is reserved: it is etcd's administrator user, which a node certificate must never map to`);
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(pool)) throw new ConfigurationError(`pool name "${pool}" must be a DNS subdomain (lowercase letters, digits, "-", ".")`);
  const nodesDir = join(dir, 'nodes');
  mkdirSync(nodesDir, { recursive: true, mode: 0o700 });
  writePair(nodesDir, name, await issueCertificate(ca, { commonName: name, organization: ROLE_NODE, organizationalUnit: pool, usage: 'client' }));
  return `wrote ${nodesDir}/${name}.crt, ${name}.key   node credentials (O=${ROLE_NODE}, OU=${pool}, CN=${name}): bound to pool ${pool}`;
}

/**
 * A replica's client certificate for etcd (--etcd-cert/--etcd-key), for an etcd that trusts
 * mcplane's CA. etcd maps its CN to an etcd user; give only those users a role on mcplane's key
 * prefix and node certificates (same CA) are refused by etcd itself.
 */
export async function pkiReplicaCommand(dir: string, name: string): Promise<string> {
  if (!/^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/.test(name)) throw new ConfigurationError(`replica name "${name}" must be lowercase letters, digits, "-", "." (at most 63)`);
  const ca = readCa(dir);
  const replicasDir = join(dir, 'replicas');
  mkdirSync(replicasDir, { recursive: true, mode: 0o700 });
  const commonName = `${REPLICA_CN_PREFIX}${name}`;
  writePair(replicasDir, name, await issueCertificate(ca, { commonName, organization: ROLE_REPLICA, usage: 'client' }));
  return [
    `wrote ${replicasDir}/${name}.crt, ${name}.key   etcd client credentials (O=${ROLE_REPLICA}, CN=${commonName})`,
    `  mcplane-server --etcd-ca ETCD_CA --etcd-cert ${replicasDir}/${name}.crt --etcd-key ${replicasDir}/${name}.key ...`,
    `  etcd maps the CN to its user "${commonName}": etcdctl user add '${commonName}' --new-user-password "$(openssl rand -hex 32)"; etcdctl user grant-role '${commonName}' mcplane`,
  ].join('\n') + '\n';
}
