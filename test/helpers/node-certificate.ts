// Puts a certificate on a node's stored record, as enrollment and registration will: the
// control plane's own write of it (issue 17) is not there yet, so tests of what reads it
// (metrics, mcctl) write the record through the store, the same object the control plane writes.

import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { NodeRecordValue } from '../../src/controlplane/stored-records.ts';
import type { TestServer } from './test-server.ts';

export type NodeCertificate = NonNullable<NodeRecordValue['certificate']>;

/** What the record holds for a certificate file (the node's real one). */
export function certificateOf(certFile: string): NodeCertificate {
  const cert = new X509Certificate(readFileSync(certFile));
  return { sha256: cert.fingerprint256.replaceAll(':', '').toLowerCase(), serial: cert.serialNumber, notAfter: Date.parse(cert.validTo) };
}

/** Writes `certificate` on node `name`'s record (creating a bare one if there is none). */
export async function recordCertificate(server: TestServer, name: string, certificate: NodeCertificate): Promise<void> {
  const { cache } = server.handle.controlPlane;
  const record = cache.nodeRecords.get(name);
  const value: NodeRecordValue = { ...(record?.value ?? { labels: {} }), certificate };
  const { revision } = await cache.store.commit([{ type: 'put', kind: 'Node', name, value, ...(record ? { createdAt: record.createdAt, expectedVersion: record.resourceVersion } : { expectedVersion: null }) }]);
  await cache.waitForRevision(revision);
}
