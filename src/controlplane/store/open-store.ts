// Chooses the backend: SQLite in the data directory for one machine (the default), or etcd for
// several replicas.

import type { Logger } from '../../runtime/logger.ts';
import { EtcdStore } from './etcd-store.ts';
import { SqliteStore } from './sqlite-store.ts';
import type { Store } from './store.ts';

export interface StoreOptions {
  dataDir: string;
  etcd?: {
    endpoints: string[];
    /** Key prefix, so several mcplane installations can share one etcd. */
    prefix?: string;
    tls?: { ca: Buffer; cert: Buffer; key: Buffer };
    /** Plaintext (no tls) to an address other than loopback: refused unless set. */
    allowPlaintext?: boolean;
  };
  log: Logger;
}

export async function openStore(options: StoreOptions): Promise<Store> {
  if (!options.etcd) return new SqliteStore(options.dataDir);
  return EtcdStore.connect({ ...options.etcd, log: options.log });
}
