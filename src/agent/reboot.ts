// Reboots through logind (org.freedesktop.login1.Manager.Reboot(false)), never systemd1's
// Reboot(), which skips logind's inhibitors and shutdown hooks. Tests and the demo configure a
// command instead; their harness restarts the agent with a new boot id.

import { execFile } from 'node:child_process';
import { Message, systemBus } from '@jellybrick/dbus-next';
import type { AgentConfig } from './agent-config.ts';

export interface Rebooter {
  reboot(): Promise<void>;
}

export function createRebooter(config: AgentConfig['reboot']): Rebooter {
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
      (bus as unknown as NodeJS.EventEmitter).on('error', () => undefined);
      try {
        await bus.call(new Message({
          destination: 'org.freedesktop.login1', path: '/org/freedesktop/login1', interface: 'org.freedesktop.login1.Manager',
          member: 'Reboot', signature: 'b', body: [false],
        }));
      } finally {
        bus.disconnect();
      }
    },
  };
}
