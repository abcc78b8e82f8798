// mcplane-agent: runs as a systemd service (Type=notify) on each host.

import { Command } from 'commander';
import { McplaneError } from '../machineconfig/index.ts';
import { createLogger } from '../runtime/logger.ts';
import { silenceIpServernameWarning } from '../runtime/process-warnings.ts';
import { isEntryPoint } from '../runtime/entry-point.ts';
import { VERSION } from '../runtime/version.ts';
import { Agent } from './agent.ts';
import { DEFAULT_CONFIG_PATH, loadAgentConfig } from './agent-config.ts';
import { SystemdNotify } from './systemd-notify.ts';

export async function main(argv: string[]): Promise<void> {
  const program = new Command('mcplane-agent')
    .description('applies the rendered config mcplane-server assigns to this host')
    .version(VERSION, '--version')
    .option('-c, --config <file>', `agent config (default ${DEFAULT_CONFIG_PATH} under --root)`)
    .option('--root <dir>', 'the host\'s root: the config and every host path in it are read under it (images, tests)', '/')
    .showHelpAfterError();
  program.parse(argv, { from: 'user' });
  silenceIpServernameWarning();
  const opts = program.opts<{ config?: string; root: string }>();
  const config = loadAgentConfig(opts.config, opts.root);
  const log = createLogger({ name: 'mcplane-agent', level: config.logLevel });
  const notify = new SystemdNotify();
  const agent = await Agent.start(config, log);
  notify.ready(`node ${config.nodeName}, server ${config.server}`);
  log.info({ node: config.nodeName, server: config.server, version: VERSION }, 'mcplane-agent started');
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    notify.stopping();
    agent.stop().then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

if (isEntryPoint(import.meta.url)) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`mcplane-agent: ${err instanceof McplaneError ? err.message : (err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
