// Kubernetes Events on the cluster objects mcplane acts on, as client-go's event recorder
// writes them: core/v1 Events named `<object>.<hex nanoseconds>`, in the object's namespace or
// `default` for cluster-scoped objects (where `oc describe` looks for them), with the source
// component. The same event again (same object, reason and message) bumps `count` and
// `lastTimestamp` on the existing Event instead of adding one, so a repeated problem never
// floods the namespace.

import type { Logger } from '../../runtime/logger.ts';
import { kubeFailureOf, type KubernetesAccess } from './kube-client.ts';

export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

export const EVENT_SOURCE = 'mcplane-server';
/** Repeats tracked at most; the oldest are forgotten first (a new Event then starts). */
const MAX_TRACKED = 1000;

export class EventRecorder {
  /** `${uid or name}|${type}|${reason}|${message}` -> the Event recorded for it. */
  readonly #recorded = new Map<string, { namespace: string; name: string; count: number }>();

  private readonly kube: KubernetesAccess;
  private readonly log: Logger;
  constructor(kube: KubernetesAccess, log: Logger) {
    this.kube = kube;
    this.log = log;
  }

  async record(object: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const namespace = object.namespace || 'default';
    const key = `${object.kind}/${object.uid ?? object.name}|${type}|${reason}|${message}`;
    const now = new Date();
    const seen = this.#recorded.get(key);
    try {
      if (seen) {
        try {
          await this.kube.core.patchNamespacedEvent({ name: seen.name, namespace: seen.namespace, body: { count: seen.count + 1, lastTimestamp: now } }, this.kube.patchAs.merge);
          seen.count++;
          return;
        } catch (err) {
          // Events expire (an hour by default): a repeat after that starts a new one.
          if (kubeFailureOf(err).code !== 404) throw err;
          this.#recorded.delete(key);
        }
      }
      const name = `${object.name}.${(BigInt(Date.now()) * 1_000_000n + BigInt(Math.floor(Math.random() * 1e6))).toString(16)}`;
      await this.kube.core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { name, namespace },
          involvedObject: { ...object, ...(object.namespace ? {} : { namespace: undefined }) },
          reason,
          message,
          type,
          count: 1,
          firstTimestamp: now,
          lastTimestamp: now,
          source: { component: EVENT_SOURCE },
          reportingComponent: EVENT_SOURCE,
          reportingInstance: '',
        },
      });
      this.#recorded.set(key, { namespace, name, count: 1 });
      if (this.#recorded.size > MAX_TRACKED) this.#recorded.delete(this.#recorded.keys().next().value!);
    } catch (err) {
      // An event is a courtesy; failing to write one must not stop the work it reports on.
      this.log.warn({ object: `${object.kind}/${object.name}`, reason, error: kubeFailureOf(err).message }, 'cannot record a Kubernetes event');
    }
  }
}
