// Graceful pod deletion as the kubelet and apiserver do it together: deleting (or evicting) a
// pod sets metadata.deletionTimestamp at once, and the pod object goes away when its grace
// period has passed: DeleteOptions.gracePeriodSeconds if the caller gave one, otherwise the
// pod's own spec.terminationGracePeriodSeconds (30 when unset). `timeScale` shrinks the wait so
// tests stay fast (0.01: a 30 s grace period passes in 300 ms).

import type { ObjectStore, KubeObject } from './object-store.ts';
import type { ResourceType } from './resource-table.ts';

const DEFAULT_GRACE_SECONDS = 30;

export class GracefulDeletion {
  private readonly timers = new Set<NodeJS.Timeout>();

  private readonly store: ObjectStore;
  private readonly pods: ResourceType;
  private readonly timeScale: number;
  constructor(store: ObjectStore, pods: ResourceType, timeScale: number) {
    this.store = store;
    this.pods = pods;
    this.timeScale = timeScale;
  }

  gracePeriodOf(pod: KubeObject, requested: number | undefined): number {
    if (typeof requested === 'number' && requested >= 0) return requested;
    const own = pod.spec?.terminationGracePeriodSeconds;
    return typeof own === 'number' && own >= 0 ? own : DEFAULT_GRACE_SECONDS;
  }

  /** Marks the pod terminating and removes it after its grace period; returns the marked pod. */
  delete(pod: KubeObject, requestedGraceSeconds: number | undefined): KubeObject {
    const { namespace, name } = pod.metadata;
    const grace = this.gracePeriodOf(pod, requestedGraceSeconds);
    if (pod.metadata.deletionTimestamp) return pod;
    if (grace === 0) return this.store.remove(this.pods, namespace, name);
    const marked = this.store.markDeleting(this.pods, namespace, name, grace);
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (this.store.get(this.pods, namespace, name)?.metadata.uid === marked.metadata.uid) this.store.remove(this.pods, namespace, name);
    }, grace * 1000 * this.timeScale);
    timer.unref();
    this.timers.add(timer);
    return marked;
  }

  close(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
