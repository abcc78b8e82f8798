// The replica's cache is an informer: a watch that falls behind a compaction must lead to a full
// relist, never to missed events. Real etcd: the cache's only member is killed, the others
// change and compact the history meanwhile, and the member comes back.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ClusterCache, type CacheChange } from '../../src/controlplane/cache/cluster-cache.ts';
import { EtcdStore } from '../../src/controlplane/store/etcd-store.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { startEtcdCluster, type EtcdCluster } from '../../sandbox/etcd-cluster.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { parseValid, mcDoc } from '../helpers/manifests.ts';

const log = createLogger({ level: 'silent' });
let etcd: EtcdCluster;
before(async () => {
  etcd = await startEtcdCluster({ members: 3 });
});
after(() => etcd?.stop());

const config = (name: string, karg: string) => parseValid(mcDoc(name, 'worker', { kernelArguments: [karg] })).configs[0]!;

test('a watch that fell behind a compaction relists: the cache ends up with every change, and follows later ones', async () => {
  const prefix = `/cache-test-${Date.now()}/`;
  const watched = await EtcdStore.connect({ endpoints: [etcd.endpoints[0]!], prefix, log });
  const writer = await EtcdStore.connect({ endpoints: etcd.endpoints.slice(1), prefix, log });
  await writer.commit([{ type: 'put', kind: 'MachineConfig', name: '10-before', value: config('10-before', 'a=1') }]);
  const cache = await ClusterCache.start(watched, log);
  const changes: CacheChange[] = [];
  cache.on('change', (c) => changes.push(c));
  try {
    assert.ok(cache.configs.has('10-before'));

    await etcd.kill(0);
    await writer.commit([{ type: 'delete', kind: 'MachineConfig', name: '10-before' }]);
    const { revision } = await writer.commit([{ type: 'put', kind: 'MachineConfig', name: '20-while-away', value: config('20-while-away', 'b=2') }]);
    await etcd.compact(revision);
    await etcd.restart(0);

    await eventually(() => cache.configs.has('20-while-away') && !cache.configs.has('10-before'), 30_000, 'the cache caught up');
    assert.ok(changes.some((c) => c.resync), 'it relisted (a resync change), since the events were compacted away');
    assert.ok(cache.revision >= revision);

    const next = await writer.commit([{ type: 'put', kind: 'MachineConfig', name: '30-after', value: config('30-after', 'c=3') }]);
    await cache.waitForRevision(next.revision, 10_000);
    assert.ok(cache.configs.has('30-after'), 'the new watch follows changes after the relist');
  } finally {
    cache.stop();
    await watched.close();
    await writer.close();
  }
});
