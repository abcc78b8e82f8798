// How many decoded content bytes one MachineConfig, and one Apply, may hold. Base64 and percent
// encoding only shrink, but gzip lets a few kilobytes stand for gigabytes: without a budget a
// request with a thousand small gzip bombs would make the server hold a thousand full configs.

import { MAX_APPLY_CONTENTS_BYTES, MAX_CONFIG_CONTENTS_BYTES } from './constants.ts';

export class ContentsBudget {
  #used = 0;

  readonly limit: number;
  readonly scope: string;
  readonly parent?: ContentsBudget;
  constructor(limit: number, scope: string, parent?: ContentsBudget) {
    this.limit = limit;
    this.scope = scope;
    this.parent = parent;
  }

  /** The least room left in this chain: what one file may still add. A number rather than
   * tightest()'s pair, because it is asked for every file and only a refusal needs the pair. */
  left(): number {
    const own = this.#used < this.limit ? this.limit - this.#used : 0;
    if (!this.parent) return own;
    const up = this.parent.left();
    return up < own ? up : own;
  }

  /** The budget in this chain with the least room left, and that room (what a refusal names). */
  tightest(): { budget: ContentsBudget; left: number } {
    const own = { budget: this as ContentsBudget, left: Math.max(0, this.limit - this.#used) };
    const up = this.parent?.tightest();
    return up && up.left < own.left ? up : own;
  }

  charge(bytes: number): void {
    this.#used += bytes;
    this.parent?.charge(bytes);
  }

  get used(): number {
    return this.#used;
  }
}

export function applyBudget(): ContentsBudget {
  return new ContentsBudget(MAX_APPLY_CONTENTS_BYTES, 'all MachineConfigs of one apply');
}

export function configBudget(parent?: ContentsBudget): ContentsBudget {
  return new ContentsBudget(MAX_CONFIG_CONTENTS_BYTES, 'all files of one MachineConfig', parent);
}

/** "1.5 MiB (1572864 bytes)": the exact number for scripts, the rounded one for people. */
export function describeBytes(bytes: number): string {
  const mib = bytes / 1048576;
  const rounded = mib >= 1 ? `${Number(mib.toFixed(2))} MiB` : `${Number((bytes / 1024).toFixed(1))} KiB`;
  return `${rounded} (${bytes} bytes)`;
}
