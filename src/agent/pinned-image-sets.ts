// The agent's pinned image sets, beside the update engine and not inside it: the assignment
// carries the node's pool's PinnedImageSets; as soon as they differ from the last ones, the puller
// (pinned-images.ts) brings the node to them through the CRI socket, reloading CRI-O through
// systemd when the pinned_images drop-in changes. Whatever happens here, the node's update state
// is not touched: a set that cannot be pulled or has no room is reported in its own status (its
// image and reason), and the node stays Done on its config, as MCO keeps PinnedImageSet failures
// out of the node's update state. A set that failed is tried again after `retrySeconds`.

import type { PinnedImageSetStatus as WireSetStatus } from '../machineconfig/types.ts';
import type { Logger } from '../runtime/logger.ts';
import { CriImageClient } from './cri-image-client.ts';
import { PinnedImagePuller, type PinnedImageSetInput, type PinnedImageSetStatus } from './pinned-images.ts';

export interface PinnedImageSetsOptions {
  criSocket: string;
  root: string;
  minFreeBytes: number;
  imageSizeBytes: number;
  retrySeconds: number;
  /** systemd ReloadUnit crio.service. */
  reloadRuntime: () => Promise<void>;
  /** Called whenever the sets' status changed (the agent reports it). */
  onChange: () => void;
  log: Logger;
}

/**
 * Whether the assigned sets are on the node, for staging (os-staging.ts): a config is reported
 * Staged only once its pool's sets are pulled, so the drain that follows waits for them.
 */
export interface PinnedReadiness {
  /** Every assigned set is pulled at its assigned generation (true with no set). */
  ready: boolean;
  /** How many sets are assigned. */
  sets?: number;
  /** The first set that failed or was refused, with its image and reason. */
  failure?: string;
  /** The sets still pulling or queued, with their counts (`workload 1/3`). */
  waiting?: string;
}

/** How often the status is re-read and reported while pulls run (imagesDone moves). */
const PROGRESS_MS = 2000;

export class PinnedImageSets {
  readonly #options: PinnedImageSetsOptions;
  #cri: CriImageClient | undefined;
  #puller: PinnedImagePuller | undefined;
  /** The sets last assigned (undefined before the first assignment that carried them). */
  #wanted: PinnedImageSetInput[] | undefined;
  #key = '';
  /** When each set's current failure was first seen, kept while it lasts (lastFailureUnixMs). */
  readonly #failedAt = new Map<string, { reason: string; at: number }>();
  #retry: NodeJS.Timeout | undefined;
  #pinFailedAt: { reason: string; at: number } | undefined;
  #stopped = false;

  constructor(options: PinnedImageSetsOptions) {
    this.#options = options;
  }

  /**
   * The node's sets from an assignment. Nothing happens when they are what was last assigned;
   * otherwise a sync starts at once (after the one running, if any).
   */
  assign(sets: PinnedImageSetInput[]): void {
    const key = JSON.stringify(sets.map((s) => [s.name, s.generation, s.images]));
    if (this.#wanted && key === this.#key) return;
    this.#wanted = sets;
    this.#key = key;
    // An agent that never had a set has nothing to pin or unpin: it does not dial the runtime.
    if (sets.length === 0 && !this.#puller) return;
    this.#sync();
  }

  /** The sets' status in the NodeStatus shape, in the assigned order. */
  status(): WireSetStatus[] {
    const now = this.#puller?.status();
    const byName = new Map((now?.sets ?? []).map((s) => [s.name, s]));
    const sets = (this.#wanted ?? []).map((input) => toWire(input, byName.get(input.name), this.#failedAt.get(input.name)));
    // Pulled but not pinned: the drop-in or CRI-O's reload failed. Each set says so, since CRI-O
    // may collect its images until a later sync pins them.
    const pinFailure = now?.dropIn.lastFailure;
    if (pinFailure) {
      for (const s of sets) {
        if (s.state !== 'Pulled') continue;
        s.lastFailedImage = '';
        s.lastFailureCode = now!.dropIn.lastFailureCode ?? 'ERROR';
        s.lastFailureReason = `pulled, but not pinned: ${pinFailure}`;
        s.lastFailureUnixMs = this.#pinFailedAt?.reason === pinFailure ? this.#pinFailedAt.at : 0;
      }
    }
    return sets;
  }

  readiness(): PinnedReadiness {
    const sets = this.status();
    const failed = sets.find((s) => s.state === 'Failed' || s.state === 'Refused');
    const pending = sets.filter((s) => s.state !== 'Pulled' || s.currentGeneration !== s.desiredGeneration);
    if (pending.length === 0) return { ready: true, sets: sets.length };
    return {
      ready: false,
      sets: sets.length,
      ...(failed ? { failure: `PinnedImageSet/${failed.name}: ${failed.lastFailedImage ? `${failed.lastFailedImage}: ` : ''}${failed.lastFailureReason || failed.state}` } : {}),
      waiting: pending.map((s) => `${s.name} ${s.imagesDone}/${s.imagesTotal}`).join(', '),
    };
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retry);
    this.#cri?.close();
  }

  #sync(): void {
    if (this.#stopped || !this.#wanted) return;
    clearTimeout(this.#retry);
    const o = this.#options;
    this.#cri ??= new CriImageClient(o.criSocket);
    this.#puller ??= new PinnedImagePuller({
      cri: this.#cri, root: o.root, minFreeBytes: o.minFreeBytes, imageSizeBytes: () => o.imageSizeBytes, reloadRuntime: o.reloadRuntime,
    });
    const sets = this.#wanted;
    const key = this.#key;
    o.log.info({ sets: sets.map((s) => `${s.name}@${s.generation}`), criSocket: o.criSocket }, 'pinned image sets: pulling and pinning');
    const progress = setInterval(() => o.onChange(), PROGRESS_MS);
    void this.#puller.sync(sets).then((result) => {
      clearInterval(progress);
      if (this.#stopped) return;
      const now = Date.now();
      for (const s of result.sets) {
        const reason = s.lastFailure?.reason;
        if (!reason || s.state === 'Pulled') this.#failedAt.delete(s.name);
        else if (this.#failedAt.get(s.name)?.reason !== reason) this.#failedAt.set(s.name, { reason, at: now });
      }
      const pinFailure = result.dropIn.lastFailure;
      if (!pinFailure) this.#pinFailedAt = undefined;
      else if (this.#pinFailedAt?.reason !== pinFailure) this.#pinFailedAt = { reason: pinFailure, at: now };
      const failed = result.sets.filter((s) => s.state === 'Failed' || s.state === 'Refused');
      if (failed.length > 0 || pinFailure) {
        o.log.warn({ sets: failed.map((s) => ({ name: s.name, state: s.state, image: s.lastFailure?.image, reason: s.lastFailure?.reason })), retryInSeconds: o.retrySeconds }, 'pinned image sets: not all pulled; the node goes on serving');
        // Tried again later unless new sets came meanwhile (their sync is already queued).
        this.#retry = setTimeout(() => { if (this.#key === key) this.#sync(); }, o.retrySeconds * 1000);
        this.#retry.unref();
      } else {
        o.log.info({ sets: result.sets.map((s) => `${s.name}@${s.currentGeneration}`), dropIn: result.dropIn.lastChange }, 'pinned image sets: pulled and pinned');
      }
      if (result.dropIn.lastFailure) o.log.warn({ reason: result.dropIn.lastFailure }, 'pinned image sets: the CRI-O drop-in or its reload failed; tried again at the next sync');
      o.onChange();
    });
    o.onChange();
  }
}

function toWire(input: PinnedImageSetInput, s: PinnedImageSetStatus | undefined, failedAt: { at: number } | undefined): WireSetStatus {
  return {
    name: input.name,
    desiredGeneration: input.generation,
    currentGeneration: s?.currentGeneration ?? 0,
    // Before its sync reaches it (queued behind another), a set is Pending with its own count.
    imagesDone: s && s.desiredGeneration === input.generation ? s.imagesDone : 0,
    imagesTotal: input.images.length,
    lastFailedImage: s?.lastFailure?.image ?? '',
    lastFailureReason: s?.lastFailure?.reason ?? '',
    lastFailureUnixMs: s?.lastFailure ? failedAt?.at ?? 0 : 0,
    state: s && s.desiredGeneration === input.generation ? s.state : 'Pending',
    lastFailureCode: s?.lastFailure?.code ?? '',
  };
}
