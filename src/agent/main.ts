// mcplane-agent: runs as a systemd service (Type=notify) on each host.

import { Command } from 'commander';
import { createLogger } from '../runtime/logger.ts';
import { silenceIpServernameWarning } from '../runtime/process-warnings.ts';
import { onStopSignal, runProgram } from '../runtime/entry-point.ts';
import { VERSION } from '../runtime/version.ts';
import { Agent } from './agent.ts';
import { DEFAULT_CONFIG_PATH, loadAgentConfig } from './agent-config.ts';
import { SystemdNotify } from './systemd-notify.ts';

/** The agent's flags (also read by scripts/gen-reference.ts for docs/reference/flags.md). */
export function agentCommand(): Command {
  return new Command('mcplane-agent')
    .description('applies the rendered config mcplane-server assigns to this host')
    .version(VERSION, '--version')
    .option('-c, --config <file>', `agent config (default ${DEFAULT_CONFIG_PATH} under --root)`)
    .option('--root <dir>', 'the host\'s root: the config and every host path in it are read under it (images, tests)', '/')
    .showHelpAfterError();
}

export async function main(argv: string[]): Promise<void> {
  const program = agentCommand();
  program.parse(argv, { from: 'user' });
  silenceIpServernameWarning();
  const opts = program.opts<{ config?: string; root: string }>();
  const config = loadAgentConfig(opts.config, opts.root);
  const log = createLogger({ name: 'mcplane-agent', level: config.logLevel });
  const notify = new SystemdNotify(log);
  // A host that asks to join may wait hours for an operator: each wait extends systemd's start
  // timeout (TimeoutStartSec) past itself and the next request, and the unit's status says why.
  const agent = await Agent.start(config, log, { onEnrollmentWait: (status, forMs) => notify.extendStart(status, forMs) });
  notify.ready(`node ${config.nodeName}, server ${config.server}`, () => agent.engine.stuck());
  log.info({ node: config.nodeName, server: config.server, version: VERSION }, 'mcplane-agent started');
  onStopSignal(async (signal) => {
    log.info({ signal }, 'stopping');
    notify.stopping();
    await agent.stop();
    return 0;
  });
}

runProgram(import.meta.url, 'mcplane-agent', main);
