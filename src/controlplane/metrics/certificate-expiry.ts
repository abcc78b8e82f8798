// The certificates a replica serves with, as mcplane_certificate_expiry_seconds reports them:
// from the TLS material new handshakes get (read at start, and again on SIGHUP or a changed file),
// not from whatever the files hold this moment.

import { X509Certificate } from 'node:crypto';

export interface ServedCertificate {
  kind: 'ca' | 'server';
  name: string;
  /** ms since the epoch */
  notAfter: number;
}

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * Every CA of the bundle (during a CA rotation it holds the old and the new one), each named by
 * its subject CN, and the server's own certificate (the first of its chain; intermediates are
 * the CA's business), named `serverName` (the replica's name: each replica has its own).
 */
export function servedCertificates(material: { ca: Buffer | string; cert: Buffer | string }, serverName: string): ServedCertificate[] {
  const out: ServedCertificate[] = [];
  for (const pem of material.ca.toString().match(PEM_BLOCK) ?? []) {
    const ca = new X509Certificate(pem);
    out.push({ kind: 'ca', name: commonName(ca), notAfter: Date.parse(ca.validTo) });
  }
  const leaf = material.cert.toString().match(PEM_BLOCK)?.[0];
  if (leaf) out.push({ kind: 'server', name: serverName, notAfter: Date.parse(new X509Certificate(leaf).validTo) });
  return out;
}

/** The subject's CN; a CA without one is named by its serial, which is what tells two apart. */
function commonName(cert: X509Certificate): string {
  return /^CN=(.*)$/m.exec(cert.subject)?.[1] ?? `serial:${cert.serialNumber}`;
}
