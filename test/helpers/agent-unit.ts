// A sandbox host's agent run by its systemd user manager as the shipped unit runs it: Type=notify
// with Restart=on-failure, its output appended to <host dir>/agent.log. Tests of what systemd does
// with the agent (the watchdog, the start timeout) add their own [Service] settings.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SandboxHost } from '../../sandbox/sandbox-host.ts';
import type { UserSystemd } from '../../sandbox/user-systemd.ts';
import { REPO_ROOT } from './run-cli.ts';

/** Writes `unit` for `host`'s agent (started as `program`, with its config) and reloads systemd. */
export function installAgentUnit(systemd: UserSystemd, host: SandboxHost, unit: string, options: { description: string; program: string[]; service: string[] }): void {
  const log = join(host.dir, 'agent.log');
  writeFileSync(join(systemd.unitDir, unit), [
    '[Unit]',
    `Description=${options.description}`,
    '[Service]',
    'Type=notify',
    'NotifyAccess=all',
    ...options.service,
    'Restart=on-failure',
    'RestartSec=1',
    `WorkingDirectory=${REPO_ROOT}`,
    `StandardOutput=append:${log}`,
    `StandardError=append:${log}`,
    `ExecStart=${[...options.program, '--config', host.configPath].join(' ')}`,
    '',
  ].join('\n'));
  assert.equal(systemd.systemctl('daemon-reload').status, 0);
}
