// Man pages (roff, section 1) generated from the command definitions: mcctl(1) and one page per
// command, mcctl-get(1), mcctl-rollout-status(1), ..., with the same descriptions, arguments,
// options and examples as --help, so they cannot drift from the program. The client RPM ships
// them (scripts/package.ts runs `mcctl __man DIR` on the bundle it packages).

import type { Command, Option } from 'commander';
import { VERSION } from '../runtime/version.ts';

/** roff-escaped text: backslashes, and a leading dot or quote that roff would take as a request. */
function roff(text: string): string {
  return text.replace(/\\/g, '\\e').replace(/-/g, '\\-').replace(/^([.'])/gm, '\\&$1');
}

/** "mcctl-rollout-status", the page name of a command path. */
export function pageName(path: string[]): string {
  return path.join('-');
}

/** The commands a user sees under `cmd`: not the hidden ones (__man, __complete), not help. */
export function visibleCommands(cmd: Command): Command[] {
  return cmd.commands.filter((c) => !(c as unknown as { _hidden: boolean })._hidden && c.name() !== 'help');
}

function optionLines(options: readonly Option[]): string[] {
  return options.filter((o) => !o.hidden).flatMap((o) => ['.TP', `.B ${roff(o.flags)}`, roff(o.description + (o.defaultValue !== undefined && typeof o.defaultValue !== 'boolean' && !(Array.isArray(o.defaultValue) && !o.defaultValue.length) ? ` (default: ${String(o.defaultValue)})` : ''))]);
}

export function manPages(program: Command, examples: WeakMap<Command, string[]>, connectionOptions: Option[]): Map<string, string> {
  const pages = new Map<string, string>();
  const date = new Date(Number(process.env.SOURCE_DATE_EPOCH ?? 0) * 1000 || Date.now()).toISOString().slice(0, 10);
  const walk = (cmd: Command, path: string[]): void => {
    const name = pageName(path);
    const lines = [
      `.TH ${name.toUpperCase().replace(/-/g, '\\-')} 1 "${date}" "mcplane ${VERSION}" "mcplane manual"`,
      '.SH NAME',
      `${roff(name)} \\- ${roff(cmd.description())}`,
      '.SH SYNOPSIS',
      `.B ${roff(path.join(' '))}`,
      roff(cmd.usage()),
      '.SH DESCRIPTION',
      roff(cmd.description()),
    ];
    if (cmd.registeredArguments.some((a) => a.description)) {
      lines.push('.SH ARGUMENTS', ...cmd.registeredArguments.filter((a) => a.description).flatMap((a) => ['.TP', `.I ${roff(a.name())}`, roff(a.description)]));
    }
    const own = optionLines(cmd.options);
    if (own.length) lines.push('.SH OPTIONS', ...own);
    if (path.length === 1) lines.push('.SH CONNECTION OPTIONS', 'Every command that talks to a server takes these, before or after the verb (\\fBmcctl options\\fR lists them):', ...optionLines(connectionOptions));
    const subs = visibleCommands(cmd);
    if (subs.length) lines.push('.SH COMMANDS', ...subs.flatMap((s) => ['.TP', `.B ${roff(s.name())}`, `${roff(s.description())} See \\fB${roff(pageName([...path, s.name()]))}\\fR(1).`]));
    const ex = examples.get(cmd);
    if (ex?.length) lines.push('.SH EXAMPLES', '.nf', ...ex.map((l) => `    ${roff(l)}`), '.fi');
    lines.push('.SH SEE ALSO', [path.length > 1 ? pageName(path.slice(0, -1)) : '', ...(path.length > 1 ? [] : ['mcplane-server', 'mcplane-agent'])].filter(Boolean).map((p) => `\\fB${roff(p)}\\fR(1)`).join(', ') || '\\fBmcctl\\fR(1)');
    pages.set(`${name}.1`, lines.join('\n') + '\n');
    for (const s of subs) walk(s, [...path, s.name()]);
  };
  walk(program, [program.name()]);
  return pages;
}
