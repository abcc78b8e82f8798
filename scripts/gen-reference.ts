// Writes docs/reference/flags.md from the programs' own definitions: the commander commands of
// mcplane-server (and its backup/restore), mcplane-agent and mcctl, and the keys agent.yaml
// accepts. test/docs/reference.test.ts fails when the committed file differs from what this
// prints, so a flag added, renamed or reworded in the code shows up in the docs or in a failing
// test, never nowhere.
//
//   node --import tsx scripts/gen-reference.ts          rewrite docs/reference/flags.md
//   node --import tsx scripts/gen-reference.ts --check  exit 1 when it is out of date

import type { Command, Option } from 'commander';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { agentCommand } from '../src/agent/main.ts';
import { KNOWN_KEYS, parseAgentConfig, PATH_KEYS } from '../src/agent/agent-config.ts';
import { backupCommand, restoreCommand } from '../src/controlplane/backup-command.ts';
import { serverCommand } from '../src/controlplane/main.ts';
import { CONNECTION_KEYS, CONTEXT_KEYS, FILE_KEYS } from '../src/cli/client/connection.ts';
import { buildProgram, connectionFlagOptions } from '../src/cli/main.ts';
import { visibleCommands } from '../src/cli/man-pages.ts';

export const REFERENCE_FILE = fileURLToPath(new URL('../docs/reference/flags.md', import.meta.url));

/**
 * What each agent.yaml key means. The keys themselves come from agent-config.ts: a key added
 * there without a line here (or a line here for a key that is gone) stops the generator.
 */
const AGENT_KEYS: Record<string, string> = {
  server: 'HOST:PORT of mcplane-server; several as "cp-a:7443,cp-b:7443" (give server or servers)',
  servers: 'a list of HOST:PORT, tried in turn: when the stream to one is lost the agent reconnects to the next',
  tls: '`{ca, cert, key}`: the CA certificate and this node\'s certificate and key files (required unless insecure)',
  insecure: 'plaintext gRPC to a loopback server (development only)',
  enrollment: '`{url, tokenFile}`: enroll at first start with a single-use token (the bootstrap endpoint writes it); or `{url, pool, pollSeconds}`: ask to join the pool at `/enrollment-requests` and poll (every 10 s) until `mcctl approve enrollment` or an auto-approve rule decides',
  nodeName: 'the node\'s name, a DNS subdomain (default: the host name, lowercased)',
  labels: 'labels the agent reports at registration; they describe the host and never choose a pool',
  paths: 'where the host\'s files are (the `paths.*` keys below)',
  systemdBus: '`system`, `session`, or a D-Bus address such as `unix:path=/run/user/0/bus`',
  rpmOstree: 'the rpm-ostree program to run',
  reboot: '`{method: logind}`, or `{method: command, command: [PROGRAM, ARGS...]}`',
  drift: '`{intervalSeconds, reconcileMaxRewrites, reconcileBackoffSeconds, reconcileWindowSeconds}`: the period of the full drift check (inotify reports changes between); under a pool\'s `driftPolicy: Reconcile`, a file is rewritten at once, then after 2, 4, 8 … s (from `reconcileBackoffSeconds`), and given up on (the node Degraded, naming it) after `reconcileMaxRewrites` (5) rewrites within `reconcileWindowSeconds` (600)',
  heartbeatSeconds: 'how often the agent reports while nothing changes',
  logLevel: 'fatal, error, warn, info, debug, trace or silent',
  jobTimeoutSeconds: 'how long to wait on one systemd job',
  dbusTimeoutSeconds: 'how long any one D-Bus call may wait for its reply',
  rpmOstreeTimeoutSeconds: 'how long one rpm-ostree command may run',
  stepTimeoutSeconds: 'how long one step of an update may take before the node is Degraded naming the step (and the watchdog starves)',
  metrics: '`{listen, allowNonLoopback}`: Prometheus /metrics; `listen: ""` turns it off, a non-loopback address needs `allowNonLoopback: true`',
  criSocket: 'the container runtime\'s CRI socket the pool\'s PinnedImageSets are pulled through (this machine\'s path, not moved by --root); see docs/operate/pinned-images.md',
  pinnedImages: '`{minFreeBytes, imageSizeBytes, retrySeconds}`: the room check before a set is pulled (bytes the image filesystem keeps free, MCO\'s 10 GiB; the size counted twice for each missing image, 1 GiB) and the wait before a failed set is tried again',
  staging: '`{fileSystem, minFreeDisk, imageSizes, defaultImageSize, packageSize, retrySeconds, maxRetrySeconds}`: downloads ahead of the drain (docs/operate/staging.md): the file system rpm-ostree downloads into (default `/sysroot`), the bytes kept free there (default 1Gi), size estimates by image (default 2Gi) and per package (100Mi), and the retry backoff of a failed download (10 s doubling to 600 s)',
};
const PATH_KEY_TEXT: Record<string, string> = {
  root: 'managed files are written under this root',
  unitDir: 'where unit files and dropins go',
  stateDir: 'the agent\'s journal, backups of taken-over files, renewal state',
  sshKeysDir: 'the core user\'s SSH keys directory',
  bootIdFile: 'the boot id, which tells a reboot happened',
  kernelCmdlineFile: 'the booted kernel\'s command line, which kernel arguments are validated against',
};

/**
 * What each mcctl.yaml key means, beside the connection keys (which the flags describe). The keys
 * come from connection.ts: one added there without a line here stops the generator.
 */
const MCCTL_FILE_KEYS: Record<string, string> = {
  timeout: 'old name of `requestTimeout`, still read',
  currentContext: 'the context used when neither `--context` nor `MCPLANE_CONTEXT` names one (`mcctl config use-context` sets it)',
  contexts: 'a list of servers, each `{name, ...}` with the connection keys above; the file\'s own connection keys are defaults under every context',
};

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const code = (text: string): string => `\`${text}\``;

function visible(cmd: Command): Option[] {
  return cmd.options.filter((o) => !(o as Option & { hidden?: boolean }).hidden);
}

function optionText(o: Option): string {
  let text = o.description;
  if (o.argChoices) text += ` (one of: ${o.argChoices.join(', ')})`;
  if (o.defaultValue !== undefined && o.defaultValue !== false) text += ` (default: ${JSON.stringify(o.defaultValue)})`;
  return cell(text);
}

function serverSection(): string[] {
  const lines = ['## mcplane-server', '', cell(serverCommand().description()), '',
    '`--config FILE` reads a YAML file whose keys are the flags in camelCase (the second column);',
    'flags given on the command line win over the file. The RPM\'s file is `/etc/mcplane/server.yaml`.', '',
    '| flag | config key | meaning |', '|---|---|---|'];
  for (const o of visible(serverCommand())) {
    const key = o.long === '--config' || o.long === '--version' ? '' : o.negate ? `${o.attributeName()}: false` : o.attributeName();
    lines.push(`| ${code(o.flags)} | ${key ? code(key) : ''} | ${optionText(o)} |`);
  }
  for (const cmd of [backupCommand(), restoreCommand()]) {
    lines.push('', `### ${cmd.name()}`, '', cell(cmd.description()), '', '| flag | meaning |', '|---|---|');
    for (const o of visible(cmd)) lines.push(`| ${code(o.flags)} | ${optionText(o)} |`);
  }
  return lines;
}

function agentSection(): string[] {
  const lines = ['## mcplane-agent', '', cell(agentCommand().description()), '', '| flag | meaning |', '|---|---|'];
  for (const o of visible(agentCommand())) lines.push(`| ${code(o.flags)} | ${optionText(o)} |`);
  const described = Object.keys(AGENT_KEYS);
  const missing = KNOWN_KEYS.filter((k) => !described.includes(k));
  const gone = described.filter((k) => !KNOWN_KEYS.includes(k));
  const missingPaths = PATH_KEYS.filter((k) => !(k in PATH_KEY_TEXT));
  const gonePaths = Object.keys(PATH_KEY_TEXT).filter((k) => !PATH_KEYS.includes(k));
  if (missing.length || gone.length || missingPaths.length || gonePaths.length) {
    throw new Error(`scripts/gen-reference.ts: describe the agent.yaml keys ${[...missing, ...missingPaths.map((k) => `paths.${k}`)].join(', ') || '(none)'}; drop ${[...gone, ...gonePaths.map((k) => `paths.${k}`)].join(', ') || '(none)'}`);
  }
  // Defaults as the parser fills them in for a minimal config on a host whose root is "/".
  const defaults = parseAgentConfig({ server: 'SERVER:7443', insecure: true, nodeName: 'node' }) as unknown as Record<string, unknown>;
  const shown = (key: string): string => {
    if (key === 'server' || key === 'servers' || key === 'tls' || key === 'enrollment' || key === 'nodeName' || key === 'labels' || key === 'paths') return '';
    if (key === 'insecure') return code('false');
    return code(JSON.stringify(defaults[key]));
  };
  lines.push('', '### agent.yaml', '',
    '`/etc/mcplane/agent.yaml`, then every `/etc/mcplane/agent.yaml.d/*.yaml` merged over it in name order',
    '(maps merge, other values replace). An unknown key is an error naming it.', '',
    '| key | default | meaning |', '|---|---|---|');
  for (const key of KNOWN_KEYS) lines.push(`| ${code(key)} | ${shown(key)} | ${cell(AGENT_KEYS[key]!)} |`);
  const paths = defaults.paths as Record<string, string>;
  for (const key of PATH_KEYS) lines.push(`| ${code(`paths.${key}`)} | ${code(paths[key]!)} | ${cell(PATH_KEY_TEXT[key]!)} |`);
  return lines;
}

function mcctlSection(): string[] {
  const program = buildProgram({ out: () => undefined, err: () => undefined });
  const flags = connectionFlagOptions();
  // The program's visible flags (--version) are not repeated under each command; the connection
  // flags are hidden from every command's help, so visible() leaves them out there.
  const connection = new Set(visible(program).map((o) => o.long));
  const keyOf = (o: Option): string => (o.attributeName() in CONNECTION_KEYS ? o.attributeName() : '');
  const described = [...Object.keys(CONNECTION_KEYS).filter((k) => flags.some((o) => keyOf(o) === k)), ...Object.keys(MCCTL_FILE_KEYS)];
  const undescribed = FILE_KEYS.filter((k) => !described.includes(k));
  const gone = described.filter((k) => !FILE_KEYS.includes(k));
  if (undescribed.length || gone.length) {
    throw new Error(`scripts/gen-reference.ts: describe the mcctl.yaml keys ${undescribed.join(', ') || '(none)'}; drop ${gone.join(', ') || '(none)'}`);
  }
  const lines = ['## mcctl', '', cell(program.description()), '',
    '### Connection flags', '',
    'Accepted before the verb and after it by every command that talks to a server, and listed by',
    '`mcctl options` rather than in each command\'s help. The same settings come from',
    '`MCPLANE_SERVER`, `MCPLANE_STATUS_SERVER`, `MCPLANE_PKI_DIR`, `MCPLANE_INSECURE=1`, `MCPLANE_CONTEXT`',
    'and the client config file (`~/.config/mcplane/mcctl.yaml`, `MCCTL_CONFIG` or `--config`);',
    'flags win over the environment, the environment over the file.', '',
    '| flag | mcctl.yaml key | meaning |', '|---|---|---|'];
  for (const o of flags) lines.push(`| ${code(o.flags)} | ${keyOf(o) ? code(keyOf(o)) : ''} | ${optionText(o)} |`);
  const own = visible(program).filter((o) => !flags.some((f) => f.long === o.long));
  if (own.length) lines.push('', `The program's own: ${own.map((o) => `${code(o.flags)} (${optionText(o)})`).join(', ')}.`);
  lines.push('', '### mcctl.yaml', '',
    'The connection keys above (as defaults, or per context), and these; an unknown key is an error',
    'naming it and the file. A context\'s keys are `' + CONTEXT_KEYS.join('`, `') + '`.', '',
    '| key | meaning |', '|---|---|');
  for (const key of Object.keys(MCCTL_FILE_KEYS)) lines.push(`| ${code(key)} | ${cell(MCCTL_FILE_KEYS[key]!)} |`);
  const walk = (cmd: Command, path: string[]): void => {
    // Hidden commands (__man, __complete) are the build's and the shells', not the user's.
    for (const sub of visibleCommands(cmd)) {
      const name = [...path, sub.name()];
      const own = visible(sub).filter((o) => !connection.has(o.long) || sub.options.some((x) => x.long === '--request-timeout') && o.long === '--timeout');
      const aliases = sub.aliases().length ? ` (also: ${sub.aliases().join(', ')})` : '';
      lines.push('', `### mcctl ${name.join(' ')}`, '', `\`mcctl ${name.join(' ')} ${sub.usage()}\`${aliases}`, '', cell(sub.description()));
      if (own.length) {
        lines.push('', '| flag | meaning |', '|---|---|');
        for (const o of own) lines.push(`| ${code(o.flags)} | ${optionText(o)} |`);
      }
      walk(sub, name);
    }
  };
  walk(program, []);
  return lines;
}

export function generateReference(): string {
  return [
    '# Flags and configuration keys',
    '',
    '<!-- Generated by scripts/gen-reference.ts from the programs\' definitions; do not edit.',
    '     Regenerate: node --import tsx scripts/gen-reference.ts (test/docs/reference.test.ts checks it). -->',
    '',
    'Every flag of `mcplane-server`, `mcplane-agent` and `mcctl`, and every key of `server.yaml`,',
    '`agent.yaml` and `mcctl.yaml`, as the code defines them.',
    '',
    ...serverSection(),
    '',
    ...agentSection(),
    '',
    ...mcctlSection(),
    '',
  ].join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const text = generateReference();
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(REFERENCE_FILE, 'utf8');
    } catch { /* missing counts as out of date */ }
    if (current !== text) {
      process.stderr.write('docs/reference/flags.md is out of date: run node --import tsx scripts/gen-reference.ts\n');
      process.exit(1);
    }
  } else {
    writeFileSync(REFERENCE_FILE, text);
    process.stdout.write(`wrote ${REFERENCE_FILE}\n`);
  }
}
