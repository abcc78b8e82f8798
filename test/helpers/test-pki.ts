// A real CA and certificates for tests, made once per process (ECDSA keys are cheap).

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCertificateAuthority, issueCertificate, ROLE_ADMIN, ROLE_NODE, type KeyPairPem } from '../../src/runtime/pki.ts';

export interface TestPki {
  dir: string;
  ca: KeyPairPem;
  /**
   * Files for a node certificate bound to `pool` (default worker), issued on first use, at the
   * node name's certificate `generation` (default 0, as `mcctl pki node` without --generation).
   */
  node(name: string, pool?: string, generation?: number): Promise<{ ca: string; cert: string; key: string }>;
  /**
   * Files for a fresh node certificate living `lifetimeMs` (rotation tests), in a directory of its
   * own: the agent overwrites them when it renews.
   */
  shortLivedNode(name: string, lifetimeMs: number, pool?: string): Promise<{ ca: string; cert: string; key: string }>;
  /** Files for a certificate with any subject, e.g. a forged role. */
  client(base: string, commonName: string, organization: string, ca?: KeyPairPem): Promise<{ ca: string; cert: string; key: string }>;
}

let cached: Promise<TestPki> | undefined;

export function testPki(): Promise<TestPki> {
  cached ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcplane-pki-'));
    const ca = await createCertificateAuthority('mcplane test CA');
    const write = (base: string, pair: KeyPairPem): void => {
      writeFileSync(join(dir, `${base}.crt`), pair.certPem);
      writeFileSync(join(dir, `${base}.key`), pair.keyPem, { mode: 0o600 });
    };
    write('ca', ca);
    write('server', await issueCertificate(ca, { commonName: 'mcplane-server', hosts: ['localhost', '127.0.0.1', '::1'], usage: 'server' }));
    write('admin', await issueCertificate(ca, { commonName: 'admin', organization: ROLE_ADMIN, usage: 'client' }));
    // One token per built-in pool, as `mcctl pki init` writes them: each serves its pool only.
    writeFileSync(join(dir, 'bootstrap-token'), 'worker:test-bootstrap-token\nmaster:test-master-bootstrap-token\n');
    const issued = new Map<string, Promise<void>>();
    const client = async (base: string, commonName: string, organization: string, signer = ca, organizationalUnit?: string, generation = 0) => {
      if (!issued.has(base)) issued.set(base, issueCertificate(signer, { commonName, organization, usage: 'client', generation, ...(organizationalUnit ? { organizationalUnit } : {}) }).then((p) => write(base, p)));
      await issued.get(base);
      return { ca: join(dir, 'ca.crt'), cert: join(dir, `${base}.crt`), key: join(dir, `${base}.key`) };
    };
    const shortLivedNode = async (name: string, lifetimeMs: number, pool = 'worker') => {
      const own = mkdtempSync(join(tmpdir(), 'mcplane-node-'));
      const pair = await issueCertificate(ca, { commonName: name, organization: ROLE_NODE, organizationalUnit: pool, usage: 'client', validityMs: lifetimeMs });
      const files = { ca: join(own, 'ca.crt'), cert: join(own, 'node.crt'), key: join(own, 'node.key') };
      writeFileSync(files.ca, ca.certPem);
      writeFileSync(files.cert, pair.certPem);
      writeFileSync(files.key, pair.keyPem, { mode: 0o600 });
      return files;
    };
    return { dir, ca, client, shortLivedNode, node: (name: string, pool = 'worker', generation = 0) => client(`node-${name}-${pool}${generation ? `-g${generation}` : ''}`, name, ROLE_NODE, ca, pool, generation) };
  })();
  return cached;
}
