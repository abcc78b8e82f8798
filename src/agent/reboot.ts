// Reboots through logind (org.freedesktop.login1.Manager.Reboot(false)), never systemd1's
// Reboot(), which skips logind's inhibitors and shutdown hooks. Tests and the demo configure a
// command instead; their harness restarts the agent with a new boot id.

import { execFile } from 'node:child_process';
import { Message, systemBus } from '@jellybrick/dbus-next';
import type { AgentConfig } from './agent-config.ts';

export interface Rebooter {
  reboot(): Promise<void>;
}

/** logind answers Reboot() at once (the shutdown happens after); no reply means it is wedged. */
const LOGIND_TIMEOUT_MS = 25_000;

export function createRebooter(config: AgentConfig['reboot'], timeoutMs = LOGIND_TIMEOUT_MS): Rebooter {
  return oncePerBoot(requestReboot(config, timeoutMs));
}

/**
 * One reboot request per boot. Once a request succeeded the machine is going down; a second one
 * (an update replayed meanwhile, as the assignment that arrives while a health-gate rollback runs)
 * would only race the shutdown, and the tests' reboot stand-in was seen failing on it. A request
 * that failed may be made again.
 */
export function oncePerBoot(rebooter: Rebooter): Rebooter {
  let requested: Promise<void> | undefined;
  return {
    reboot() {
      requested ??= rebooter.reboot().catch((err: unknown) => {
        requested = undefined;
        throw err;
      });
      return requested;
    },
  };
}

function requestReboot(config: AgentConfig['reboot'], timeoutMs: number): Rebooter {
  if (config.method === 'command') {
    const [program, ...args] = config.command;
    return {
      reboot: () => new Promise((resolve, reject) => {
        execFile(program!, args, { timeout: 60_000 }, (err, _out, stderr) => (err ? reject(new Error(`${config.command.join(' ')}: ${stderr.trim() || err.message}`)) : resolve()));
      }),
    };
  }
  return {
    async reboot() {
      const bus = systemBus();
      let timer: NodeJS.Timeout | undefined;
      let lost: ((err: Error) => void) | undefined;
      (bus as unknown as NodeJS.EventEmitter).on('error', (err: Error) => lost?.(err));
      try {
        await Promise.race([
          bus.call(new Message({
            destination: 'org.freedesktop.login1', path: '/org/freedesktop/login1', interface: 'org.freedesktop.login1.Manager',
            member: 'Reboot', signature: 'b', body: [false],
          })),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`logind Reboot(false): no reply on the system bus within ${timeoutMs / 1000}s`)), timeoutMs);
            lost = (err) => reject(new Error(`logind Reboot(false): the system bus connection failed: ${err.message}`));
          }),
        ]);
      } finally {
        clearTimeout(timer);
        bus.disconnect();
      }
    },
  };
}
