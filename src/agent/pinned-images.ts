// Pre-pulls and pins the images of a node's pinned image sets through the CRI, as MCO's
// PinnedImageSetManager does: every reference checked (digests only), the image filesystem's room
// checked for each set before anything is pulled, the missing images pulled with bounded
// concurrency and retries with backoff, and CRI-O's pinned_images drop-in written last, once every
// image of every set is on the node. Nothing here throws to its caller: a failure is recorded in
// the set's status (its image and reason) and the node goes on serving with what it has.

import { statfsSync } from 'node:fs';
import { formatProblem, PinnedImageDiskSpaceError, PinnedImagePullError, type McplaneError } from '../machineconfig/errors.ts';
import { pinnedImageProblems } from '../machineconfig/pinned-image-reference.ts';
import type { CriImageClient } from './cri-image-client.ts';
import { CRIO_PINNED_IMAGES_DROP_IN, ensureCrioPinnedImagesDropIn, uniqueSortedImageNames } from './crio-pinned-images.ts';

export interface PinnedImageSetInput {
  name: string;
  /** metadata.generation of the set, reported back as the desired generation. */
  generation: number;
  images: string[];
}

export interface PinnedImageFailure {
  /** The image that failed; null when the failure is the set's as a whole (no room, bad reference). */
  image: string | null;
  code: string;
  reason: string;
}

export interface PinnedImageSetStatus {
  name: string;
  desiredGeneration: number;
  /** The last generation whose images were all on the node; null before the first. */
  currentGeneration: number | null;
  state: 'Pending' | 'Pulling' | 'Pulled' | 'Failed' | 'Refused';
  imagesDone: number;
  imagesTotal: number;
  lastFailure: PinnedImageFailure | null;
}

export interface PinnedImageStatus {
  sets: PinnedImageSetStatus[];
  /** The runtime's image filesystem as last measured: ImageFsInfo's mountpoint and used bytes, statfs's free bytes. */
  imageFilesystem: { mountpoint: string; usedBytes: number | null; freeBytes: number } | null;
  dropIn: { path: string; images: number; lastChange: 'written' | 'removed' | 'unchanged' | null; lastFailure: string | null; lastFailureCode?: string };
}

export interface RetryPolicy {
  /** Pull attempts per image (MCO: 5). */
  attempts: number;
  /** Wait before the second attempt, then multiplied by `factor` up to `capMs` (MCO: 1 s, 2, 10 s). */
  initialMs: number;
  factor: number;
  capMs: number;
}

export interface PinnedImagePullerOptions {
  cri: CriImageClient;
  /** The agent's host root: the drop-in is written at <root>/etc/crio/crio.conf.d/50-pinned-images. */
  root: string;
  /**
   * Bytes the image filesystem must keep free after the pulls (MCO's minStorageAvailableBytes).
   * Default 10 GiB.
   */
  minFreeBytes?: number;
  /**
   * The size an image is expected to take, compressed, before it is pulled: the CRI tells no size
   * until an image is there, and this agent has no registry client to read the manifest's layer
   * sizes (MCO runs `podman manifest inspect`). Twice this is counted, for the unpacked copy, as
   * MCO does. Default: 1 GiB for every image.
   */
  imageSizeBytes?: (image: string) => number;
  /** Pulls at once (MCO: 5 workers, 1 on a control-plane node). */
  concurrency?: number;
  retry?: Partial<RetryPolicy>;
  /** Reloads CRI-O after the drop-in changed (e.g. systemd ReloadUnit crio.service); a rejection is recorded. */
  reloadRuntime: () => Promise<void>;
}

const GiB = 1024 ** 3;
const MCO_RETRY: RetryPolicy = { attempts: 5, initialMs: 1000, factor: 2, capMs: 10_000 };

export class PinnedImagePuller {
  readonly #options: PinnedImagePullerOptions;
  readonly #retry: RetryPolicy;
  readonly #sets = new Map<string, PinnedImageSetStatus>();
  #imageFilesystem: PinnedImageStatus['imageFilesystem'] = null;
  #dropIn: PinnedImageStatus['dropIn'] = { path: CRIO_PINNED_IMAGES_DROP_IN, images: 0, lastChange: null, lastFailure: null };
  #running: Promise<PinnedImageStatus> | undefined;
  /** A write or reload of the drop-in failed: CRI-O may not have the pins on disk, so reload next time even if the file is unchanged. */
  #reloadOwed = false;

  constructor(options: PinnedImagePullerOptions) {
    this.#options = options;
    this.#retry = { ...MCO_RETRY, ...options.retry };
  }

  /** A copy of the status as it stands, mid-sync included. */
  status(): PinnedImageStatus {
    return structuredClone({ sets: [...this.#sets.values()], imageFilesystem: this.#imageFilesystem, dropIn: this.#dropIn });
  }

  /**
   * Brings the node to `sets` (all the pinned image sets of its pools) and resolves to the status.
   * Never rejects. A call while one runs waits for it, then runs with its own sets.
   */
  async sync(sets: PinnedImageSetInput[]): Promise<PinnedImageStatus> {
    const previous = this.#running;
    const run = (async () => {
      await previous?.catch(() => undefined);
      try {
        await this.#sync(sets);
      } catch (err) {
        // A bug, not a runtime's answer: still not the agent's to die of. Every set says so.
        for (const s of this.#sets.values()) if (s.state === 'Pending' || s.state === 'Pulling') this.#fail(s, null, err);
      }
      return this.status();
    })();
    this.#running = run;
    return run;
  }

  async #sync(inputs: PinnedImageSetInput[]): Promise<void> {
    const { cri } = this.#options;
    const previous = new Map(this.#sets);
    this.#sets.clear();
    const accepted: { input: PinnedImageSetInput; status: PinnedImageSetStatus }[] = [];
    for (const input of inputs) {
      const status: PinnedImageSetStatus = {
        name: input.name,
        desiredGeneration: input.generation,
        currentGeneration: previous.get(input.name)?.currentGeneration ?? null,
        state: 'Pending',
        imagesDone: 0,
        imagesTotal: input.images.length,
        lastFailure: null,
      };
      this.#sets.set(input.name, status);
      const problems = pinnedImageProblems(input.name, input.images);
      if (problems.length > 0) {
        status.state = 'Refused';
        const first = problems[0]!;
        const image = /^spec\.pinnedImages\[(\d+)\]/.exec(first.field);
        status.lastFailure = { image: image ? input.images[Number(image[1])] ?? null : null, code: 'MCPLANE_INVALID_DOCUMENT', reason: problems.map(formatProblem).join('; ') };
        continue;
      }
      accepted.push({ input, status });
    }

    // The room check, per set in order, each accepted set's need taken from what the next may use.
    let fs;
    try {
      fs = await this.#measureImageFilesystem();
    } catch (err) {
      for (const { status } of accepted) this.#fail(status, null, err);
      return;
    }
    let free = fs.freeBytes;
    const minFree = this.#options.minFreeBytes ?? 10 * GiB;
    const sizeOf = this.#options.imageSizeBytes ?? (() => GiB);
    const present = new Map<string, boolean>();
    const counted = new Set<string>();
    const toPull: { input: PinnedImageSetInput; status: PinnedImageSetStatus; missing: string[] }[] = [];
    for (const { input, status } of accepted) {
      const missing: string[] = [];
      try {
        for (const image of input.images) {
          if (!present.has(image)) present.set(image, (await cri.imageStatus(image)) !== null);
          if (!present.get(image)) missing.push(image);
        }
      } catch (err) {
        this.#fail(status, null, err);
        continue;
      }
      // An image an accepted set already counted takes no more room for this one.
      const uncounted = [...new Set(missing)].filter((image) => !counted.has(image));
      const needed = uncounted.reduce((sum, image) => sum + 2 * sizeOf(image), 0);
      if (needed > 0 && free - needed < minFree) {
        this.#fail(status, null, new PinnedImageDiskSpaceError(input.name, fs.mountpoint, fs.freeBytes, needed, minFree));
        continue;
      }
      free -= needed;
      for (const image of uncounted) counted.add(image);
      status.imagesDone = input.images.length - missing.length;
      status.state = missing.length > 0 ? 'Pulling' : 'Pulled';
      toPull.push({ input, status, missing });
    }

    // One pull per distinct image, however many sets list it; each set counts it when it lands.
    const waiting = new Map<string, PinnedImageSetStatus[]>();
    for (const { status, missing } of toPull) for (const image of missing) waiting.set(image, [...(waiting.get(image) ?? []), status]);
    const queue = [...waiting.keys()];
    const worker = async (): Promise<void> => {
      for (let image = queue.shift(); image !== undefined; image = queue.shift()) {
        const err = await this.#pullWithRetry(image);
        for (const status of waiting.get(image)!) {
          if (err) this.#fail(status, image, err);
          else status.imagesDone++;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(this.#options.concurrency ?? 5, queue.length)) }, worker));
    for (const { input, status } of toPull) {
      if (status.state === 'Pulling' && status.imagesDone === status.imagesTotal) status.state = 'Pulled';
      if (status.state === 'Pulled') status.currentGeneration = input.generation;
    }

    // MCO writes the pins only when every set is complete and every image still there (the
    // runtime may have collected one meanwhile), leaving a window in which an emergency GC works.
    if ([...this.#sets.values()].some((s) => s.state !== 'Pulled')) return;
    const images = uniqueSortedImageNames(inputs.flatMap((s) => s.images));
    try {
      for (const image of images) {
        if ((await cri.imageStatus(image)) === null) {
          const status = this.#sets.get(inputs.find((s) => s.images.includes(image))!.name)!;
          status.state = 'Failed';
          status.imagesDone--;
          status.lastFailure = { image, code: 'MCPLANE_PINNED_IMAGE_PULL', reason: `${image} was removed from the node after it was pulled` };
          return;
        }
      }
      const result = await ensureCrioPinnedImagesDropIn(this.#options.root, images, this.#options.reloadRuntime);
      if (result.change === 'unchanged' && this.#reloadOwed) await this.#options.reloadRuntime();
      this.#reloadOwed = false;
      this.#dropIn = { path: CRIO_PINNED_IMAGES_DROP_IN, images: images.length, lastChange: result.change, lastFailure: null };
    } catch (err) {
      this.#reloadOwed = true;
      const { code, reason } = describe(err);
      this.#dropIn = { ...this.#dropIn, lastFailure: reason, lastFailureCode: code };
    }
  }

  async #measureImageFilesystem(): Promise<{ mountpoint: string; freeBytes: number }> {
    const info = await this.#options.cri.imageFsInfo();
    const fs = info.imageFilesystems[0];
    if (!fs || fs.mountpoint === '') throw new PinnedImageDiskSpaceError('(all)', '(none reported)', 0, 0, 0);
    // The CRI reports what the images use, not what is left: the rest is the file system's own
    // count of blocks an unprivileged writer may still take, as the kubelet reads it. The runtime
    // runs on this machine, so its mountpoint is a path here (not under the agent's root).
    const st = statfsSync(fs.mountpoint);
    const freeBytes = Number(st.bavail) * Number(st.bsize);
    this.#imageFilesystem = { mountpoint: fs.mountpoint, usedBytes: fs.usedBytes, freeBytes };
    return { mountpoint: fs.mountpoint, freeBytes };
  }

  /** Resolves to undefined once pulled, or to the error of the last attempt. */
  async #pullWithRetry(image: string): Promise<PinnedImagePullError | undefined> {
    let delay = this.#retry.initialMs;
    let reason = '';
    for (let attempt = 1; attempt <= this.#retry.attempts; attempt++) {
      try {
        await this.#options.cri.pullImage(image);
        return undefined;
      } catch (err) {
        reason = describe(err).reason;
        // MCO fails fast when the disk is full: another attempt would only fill it again.
        if (/no space left on device/i.test(reason) || attempt === this.#retry.attempts) return new PinnedImagePullError(image, attempt, reason);
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * this.#retry.factor, this.#retry.capMs);
    }
    return new PinnedImagePullError(image, this.#retry.attempts, reason);
  }

  #fail(status: PinnedImageSetStatus, image: string | null, err: unknown): void {
    const { code, reason } = describe(err);
    status.state = err instanceof PinnedImageDiskSpaceError ? 'Refused' : 'Failed';
    status.lastFailure = { image: err instanceof PinnedImagePullError ? err.image : image, code, reason };
  }
}

function describe(err: unknown): { code: string; reason: string } {
  if (err instanceof Error) return { code: (err as McplaneError).code ?? 'ERROR', reason: err.message };
  return { code: 'ERROR', reason: String(err) };
}
