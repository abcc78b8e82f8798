// mcctl pki init DIR / mcctl pki node NAME / mcctl pki operator NAME / mcctl pki replica NAME: certificates;
// mcctl pki ca rotate|promote|retire DIR: a CA rollover with overlap.

import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { randomBytes, X509Certificate } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { ConfigurationError, MASTER_POOL, nodeNameProblem, WORKER_POOL } from '../../machineconfig/index.ts';
import { API_ROLES, ROLE_ORGANIZATIONS, type ApiRole } from '../../runtime/api-roles.ts';
import { createCertificateAuthority, issueCertificate, issuerIn, REPLICA_CN_PREFIX, RESERVED_NODE_NAMES, ROLE_ADMIN, ROLE_NODE, ROLE_REPLICA, signerCertificate, splitPemBundle, type KeyPairPem } from '../../runtime/pki.ts';

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
export async function pkiNodeCommand(dir: string, name: string, pool = WORKER_POOL, generation = '0'): Promise<string> {
  if (!/^(0|[1-9][0-9]{0,14})$/.test(generation)) throw new ConfigurationError(`--generation "${generation}" must be a whole number >= 0 (the node name's certificate generation)`);
  return (await issueNode(dir, readCa(dir), name, pool, Number(generation))) + '\n';
}

async function issueNode(dir: string, ca: KeyPairPem, name: string, pool: string, generation = 0): Promise<string> {
  const nameProblem = nodeNameProblem(name);
  if (nameProblem) throw new ConfigurationError(`node name ${nameProblem}`);
  if (RESERVED_NODE_NAMES.has(name)) throw new ConfigurationError(`node name "${name}" is reserved: it is etcd's administrator user, which a node certificate must never map to`);
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(pool)) throw new ConfigurationError(`pool name "${pool}" must be a DNS subdomain (lowercase letters, digits, "-", ".")`);
  const nodesDir = join(dir, 'nodes');
  mkdirSync(nodesDir, { recursive: true, mode: 0o700 });
  writePair(nodesDir, name, await issueCertificate(ca, { commonName: name, organization: ROLE_NODE, organizationalUnit: pool, generation, usage: 'client' }));
  return `wrote ${nodesDir}/${name}.crt, ${name}.key   node credentials (O=${ROLE_NODE}, OU=${pool}, CN=${name}${generation ? `, generation ${generation}` : ''}): bound to pool ${pool}`;
}

/**
 * An API credential for a person or a tool: O carries the role (viewer, operator, admin), each
 * OU a pool an operator is limited to. Written as operators/NAME.crt and .key, beside nodes/.
 */
export async function pkiOperatorCommand(dir: string, name: string, role: string, pools: string[]): Promise<string> {
  if (!/^[a-z0-9]([-a-z0-9.@_]{0,61}[a-z0-9])?$/.test(name)) throw new ConfigurationError(`operator name "${name}" must be lowercase letters, digits, "-", ".", "_", "@" (at most 63), starting and ending with a letter or digit`);
  if (!(API_ROLES as readonly string[]).includes(role)) throw new ConfigurationError(`--role ${role}: expected one of ${API_ROLES.join(', ')}`);
  const apiRole = role as ApiRole;
  for (const pool of pools) {
    if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(pool)) throw new ConfigurationError(`--pool "${pool}": a pool name must be a DNS subdomain (lowercase letters, digits, "-", ".")`);
  }
  if (pools.length && apiRole !== 'operator') throw new ConfigurationError(`--pool limits an operator only: a ${apiRole} ${apiRole === 'viewer' ? 'reads every pool' : 'may do everything'}; give --role operator`);
  const ca = readCa(dir);
  const operatorsDir = join(dir, 'operators');
  mkdirSync(operatorsDir, { recursive: true, mode: 0o700 });
  const organization = ROLE_ORGANIZATIONS[apiRole];
  writePair(operatorsDir, name, await issueCertificate(ca, { commonName: name, organization, organizationalUnit: [...new Set(pools)], usage: 'client' }));
  const scope = pools.length ? `, OU=${[...new Set(pools)].join(', OU=')}: pools ${[...new Set(pools)].join(', ')} only` : '';
  return [
    `wrote ${operatorsDir}/${name}.crt, ${name}.key   ${apiRole} credentials (CN=${name}, O=${organization}${scope})`,
    `  mcctl --server HOST:7443 --ca ${dir}/ca.crt --cert ${operatorsDir}/${name}.crt --key ${operatorsDir}/${name}.key get pools`,
  ].join('\n') + '\n';
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

// CA rollover, in three steps with overlap, so nothing that trusts or holds a certificate of the
// old CA stops working before it has what it needs from the new one:
//
//   rotate   a new CA (ca-next.key) is added to the trust bundle ca.crt; the old one still signs.
//            Servers trust both once they read ca.crt again (SIGHUP, or they notice the change);
//            every agent gets the two-CA bundle with its next renewal.
//   promote  the new CA signs (ca.key is the new key; the old is kept as ca-previous.key): each
//            agent's next renewal gives it a certificate from the new CA. The server certificate
//            stays the old CA's: agents that have not renewed since rotate trust only that one.
//   retire   once every agent has renewed since promote (two thirds of the node certificate
//            lifetime after it, or sooner if all show certificates issued since): the old CA
//            leaves the bundle, and server.crt and admin.crt are issued again by the new CA.

const CA_NEXT = 'ca-next';

function writeAtomic(path: string, text: string, mode: number): void {
  const temp = `${path}.tmp-${randomBytes(4).toString('hex')}`;
  writeFileSync(temp, text, { mode });
  renameSync(temp, path);
}

export async function pkiCaRotateCommand(dir: string): Promise<string> {
  const ca = readCa(dir);
  if (existsSync(join(dir, `${CA_NEXT}.key`))) throw new ConfigurationError(`${dir} already holds a next CA (${CA_NEXT}.key): promote it with mcctl pki ca promote ${dir}`);
  const next = await createCertificateAuthority(`mcplane CA ${new Date().toISOString().slice(0, 19)}Z`);
  writePair(dir, CA_NEXT, next);
  const bundle = splitPemBundle(ca.certPem);
  writeAtomic(join(dir, 'ca.crt'), [...bundle, next.certPem].join(''), 0o644);
  return [
    `wrote ${dir}/${CA_NEXT}.crt, ${CA_NEXT}.key   the next CA (not signing yet)`,
    `added it to ${dir}/ca.crt, which now holds ${bundle.length + 1} CAs`,
    `next: copy ca.crt to every replica and send it SIGHUP; agents get the bundle with their next renewal; then mcctl pki ca promote ${dir}`,
  ].join('\n') + '\n';
}

export async function pkiCaPromoteCommand(dir: string): Promise<string> {
  const ca = readCa(dir);
  const nextKey = join(dir, `${CA_NEXT}.key`);
  if (!existsSync(nextKey)) throw new ConfigurationError(`${dir} holds no next CA (${CA_NEXT}.key): make one with mcctl pki ca rotate ${dir}`);
  const keyPem = readFileSync(nextKey, 'utf8');
  if (!signerCertificate(ca.certPem, keyPem)) throw new ConfigurationError(`${dir}/ca.crt does not hold the certificate of ${CA_NEXT}.key: run mcctl pki ca rotate again`);
  writeAtomic(join(dir, 'ca-previous.key'), ca.keyPem, 0o600);
  writeAtomic(join(dir, 'ca.key'), keyPem, 0o600);
  unlinkSync(nextKey);
  unlinkSync(join(dir, `${CA_NEXT}.crt`));
  return [
    `${dir}/ca.key is now the new CA's key (the old one kept as ca-previous.key); ca.crt still holds both`,
    `next: copy ca.key to the replicas that sign and send them SIGHUP; every agent's next renewal is signed by the new CA`,
    `then, once every node has renewed (two thirds of --node-certificate-lifetime): mcctl pki ca retire ${dir}`,
  ].join('\n') + '\n';
}

export async function pkiCaRetireCommand(dir: string): Promise<string> {
  const ca = readCa(dir);
  const signer = signerCertificate(ca.certPem, ca.keyPem);
  if (!signer) throw new ConfigurationError(`${dir}/ca.key is the key of no CA in ${dir}/ca.crt`);
  const retired = splitPemBundle(ca.certPem).filter((c) => c !== signer);
  if (retired.length === 0) throw new ConfigurationError(`${dir}/ca.crt holds only the signing CA: nothing to retire`);
  if (existsSync(join(dir, `${CA_NEXT}.key`))) throw new ConfigurationError(`${dir} holds a next CA that is not promoted yet: mcctl pki ca promote ${dir} first`);
  const signing: KeyPairPem = { certPem: signer, keyPem: ca.keyPem };
  const lines: string[] = [];
  // Server and operator certificates the old CA issued are issued again, same subject and names.
  const server = join(dir, 'server.crt');
  if (existsSync(server) && !issuerIn(readFileSync(server), signer)) {
    const cert = new X509Certificate(readFileSync(server));
    const hosts = (cert.subjectAltName ?? '').split(', ').map((n) => n.replace(/^(DNS|IP Address):/, '')).filter(Boolean);
    const pair = await issueCertificate(signing, { commonName: 'mcplane-server', hosts, usage: 'server' });
    writeAtomic(join(dir, 'server.key'), pair.keyPem, 0o600);
    writeAtomic(server, pair.certPem, 0o644);
    lines.push(`wrote ${server}, server.key   issued again by the new CA (for ${hosts.join(', ')})`);
  }
  const admin = join(dir, 'admin.crt');
  if (existsSync(admin) && !issuerIn(readFileSync(admin), signer)) {
    writePair(dir, 'admin', await issueCertificate(signing, { commonName: 'admin', organization: ROLE_ADMIN, usage: 'client' }));
    lines.push(`wrote ${admin}, admin.key     issued again by the new CA`);
  }
  writeAtomic(join(dir, 'ca.crt'), signer, 0o644);
  if (existsSync(join(dir, 'ca-previous.key'))) unlinkSync(join(dir, 'ca-previous.key'));
  lines.push(`${dir}/ca.crt holds only the new CA now; ca-previous.key removed`);
  for (const sub of ['nodes', 'replicas', 'operators']) {
    let names: string[] = [];
    try {
      names = readdirSync(join(dir, sub)).filter((f) => f.endsWith('.crt'));
    } catch { /* none issued */ }
    const stale = names.filter((f) => !issuerIn(readFileSync(join(dir, sub, f)), signer));
    if (stale.length) lines.push(`warning: ${sub}/${stale.join(`, ${sub}/`)} were issued by the retired CA: issue them again (mcctl pki ${sub === 'nodes' ? 'node' : sub === 'replicas' ? 'replica' : 'operator'} NAME${sub === 'operators' ? ' --role ROLE' : ''} --pki-dir ${dir}) before hosts use them`);
  }
  lines.push('next: copy ca.crt, server.crt and server.key to every replica and send it SIGHUP (open streams stay; new connections use the new files)');
  return lines.join('\n') + '\n';
}
