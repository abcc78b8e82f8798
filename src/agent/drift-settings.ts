// What the pool says the agent does about drift (driftPolicy, driftIgnore), from the latest valid
// assignment. It follows the pool at once, whatever config the node runs (the control plane
// rewrites every assignment when the pool's spec changes), and it is kept in the state directory
// so that an agent restarted without its control plane still acts on it.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { driftIgnoreMatcher, type DriftPolicy } from '../machineconfig/index.ts';
import { writeFileAtomic } from './durable-fs.ts';

export interface DriftSettingsValue {
  policy: DriftPolicy;
  ignore: string[];
}

const POLICIES: readonly string[] = ['Degrade', 'Reconcile', 'Adopt'];

export class DriftSettings {
  #value: DriftSettingsValue | undefined;
  #ignored: (path: string) => boolean = () => false;
  readonly path: string;

  constructor(stateDir: string) {
    this.path = join(stateDir, 'drift-settings.json');
    try {
      const raw = JSON.parse(readFileSync(this.path, 'utf8')) as Partial<DriftSettingsValue>;
      if (typeof raw.policy === 'string' && POLICIES.includes(raw.policy) && Array.isArray(raw.ignore) && raw.ignore.every((g) => typeof g === 'string')) {
        this.#set({ policy: raw.policy as DriftPolicy, ignore: raw.ignore });
      }
    } catch {
      // None yet (an agent from before this file, or a new host): the journal's policy stands.
    }
  }

  /** The policy to act on: the pool's latest, else the one the current config was applied with. */
  policy(fallback: DriftPolicy): DriftPolicy {
    return this.#value?.policy ?? fallback;
  }

  get ignore(): readonly string[] {
    return this.#value?.ignore ?? [];
  }

  ignored(path: string): boolean {
    return this.#ignored(path);
  }

  /** Takes the assignment's settings; true when they changed. */
  update(value: DriftSettingsValue): boolean {
    if (this.#value && this.#value.policy === value.policy && this.#value.ignore.join('\0') === value.ignore.join('\0')) return false;
    this.#set(value);
    writeFileAtomic(this.path, JSON.stringify(value));
    return true;
  }

  #set(value: DriftSettingsValue): void {
    this.#value = { policy: value.policy, ignore: [...value.ignore] };
    this.#ignored = driftIgnoreMatcher(value.ignore);
  }
}
