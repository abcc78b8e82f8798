// The core user's password hash, set without a reboot as MCO does. A config that stops setting
// one locks password login ("*"), MCO's behaviour, rather than leaving a stale hash.
//
// The hash goes to `chpasswd -e` on its standard input, never on a command line: argv is
// readable by every local user in /proc/<pid>/cmdline and lands in audit and process logs, and
// a hash there is an offline cracking target (MCO's `usermod -p` exposes it that way).

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UpdateStepError, type MachineConfigSpec } from '../machineconfig/index.ts';

export const LOCKED = '*';

export function passwordHashOf(spec: MachineConfigSpec | null): string {
  return spec?.config.passwd.users.find((u) => u.name === 'core')?.passwordHash ?? '';
}

/** Sets core's hash if the config changes it; `root` other than "/" is chpasswd --root. */
export async function applyPasswordHash(root: string, from: MachineConfigSpec | null, to: MachineConfigSpec): Promise<boolean> {
  const before = passwordHashOf(from);
  const after = passwordHashOf(to);
  if (before === after) return false;
  const hash = after || LOCKED;
  if (/[:\n]/.test(hash)) throw new UpdateStepError('apply', 'password of core', 'the passwordHash contains ":" or a newline, which /etc/shadow cannot hold');
  await runWithStdin('chpasswd', ['--encrypted', ...(root === '/' ? [] : ['--root', root])], `core:${hash}\n`);
  return true;
}

function runWithStdin(program: string, args: string[], input: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const child = spawn(program, args, { stdio: ['pipe', 'ignore', 'pipe'], timeout: 60_000 });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
    child.on('error', (err) => reject(new UpdateStepError('apply', 'password of core', `${program}: ${err.message}`)));
    child.on('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new UpdateStepError('apply', 'password of core', `${program} ${code === null ? `killed by ${signal}` : `exited ${code}`}: ${stderr.trim() || 'no message'}`));
    });
    child.stdin.on('error', () => undefined); // it exited early; 'close' says why
    child.stdin.end(input);
  });
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
