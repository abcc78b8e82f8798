// Puts a certificate on a node's stored record without a host behind it, as enrollment and
// registration write it: for tests of what reads it (metrics, mcctl) that need nodes whose
// certificates expire at chosen times.

import { readFileSync } from 'node:fs';
import { certificateBinding } from '../../src/runtime/pki.ts';
import type { NodeRecordValue } from '../../src/controlplane/store/stored-records.ts';
import type { TestServer } from './test-server.ts';

export type NodeCertificate = NonNullable<NodeRecordValue['certificate']>;

/** What the record holds for a certificate file (the node's real one). */
export function certificateOf(certFile: string): NodeCertificate {
  return certificateBinding(readFileSync(certFile));
}

/** Writes `certificate` on node `name`'s record (creating a bare one if there is none). */
export async function recordCertificate(server: TestServer, name: string, certificate: NodeCertificate): Promise<void> {
  const { cache } = server.handle.controlPlane;
  const record = cache.nodeRecords.get(name);
  const value: NodeRecordValue = { ...(record?.value ?? { labels: {} }), certificate };
  const { revision } = await cache.store.commit([{ type: 'put', kind: 'Node', name, value, ...(record ? { createdAt: record.createdAt, expectedVersion: record.resourceVersion } : { expectedVersion: null }) }]);
  await cache.waitForRevision(revision);
}
