// The core user's password hash, set with usermod as MCO does (no reboot needed). A config that
// stops setting one locks password login ("*"), MCO's behaviour, rather than leaving a stale hash.

import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UpdateStepError, type MachineConfigSpec } from '../machineconfig/index.ts';

export const LOCKED = '*';

export function passwordHashOf(spec: MachineConfigSpec | null): string {
  return spec?.config.passwd.users.find((u) => u.name === 'core')?.passwordHash ?? '';
}

/** Sets core's hash if the config changes it; `root` other than "/" is usermod --root. */
export async function applyPasswordHash(root: string, from: MachineConfigSpec | null, to: MachineConfigSpec): Promise<boolean> {
  const before = passwordHashOf(from);
  const after = passwordHashOf(to);
  if (before === after) return false;
  const args = [...(root === '/' ? [] : ['--root', root]), '--password', after || LOCKED, 'core'];
  await new Promise<void>((resolve, reject) => {
    execFile('usermod', args, { timeout: 60_000 }, (err, _out, stderr) =>
      (err ? reject(new UpdateStepError('apply', 'password of core', `usermod: ${(stderr || err.message).trim()}`)) : resolve()));
  });
  return true;
}

/** For validation: the hash /etc/shadow holds for core, or undefined when it cannot be read. */
export function shadowHashOfCore(root: string): string | undefined {
  try {
    const line = readFileSync(join(root, 'etc/shadow'), 'utf8').split('\n').find((l) => l.startsWith('core:'));
    return line?.split(':')[1];
  } catch {
    return undefined;
  }
}
