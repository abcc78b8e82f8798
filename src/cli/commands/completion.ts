// `mcctl completion bash|zsh|fish`: shell completion scripts generated from the command tree
// itself (commander has none built in), so a new verb or flag completes without anyone editing a
// script. Object names (pools, nodes, MachineConfigs...) come from the server: where a verb takes
// one, the script runs `mcctl __complete` with the words typed so far (complete-names.ts).

import type { Command } from 'commander';
import { API_KINDS } from '../../machineconfig/api-kinds.ts';
import { ConfigurationError } from '../../machineconfig/index.ts';

/** What a positional argument completes to, by its name in the command's usage. */
const ARGUMENT_WORDS: Record<string, string[]> = {
  resource: ['pools', 'nodes', 'mc', 'rendered', API_KINDS.MachineConfigNode.mcctlName, 'replicas', 'events', 'pool/', 'node/', 'mc/', 'rendered/'],
  'pool/NAME': ['pool/'],
  shell: ['bash', 'zsh', 'fish'],
};
/** Values of options that take one from a fixed set. */
const OPTION_VALUES: Record<string, string[]> = {
  '--output': ['wide', 'name', 'yaml', 'json', 'jsonpath='],
  '--for': ['condition=Updated', 'condition=Degraded', 'condition=Updating'],
};
/** Options whose value is a path: complete file names. */
const FILE_OPTIONS = new Set(['--filename', '--pki-dir', '--ca', '--cert', '--key', '--config']);
/** Command paths whose arguments include object names, which `mcctl __complete` lists from the server. */
const NAME_PATHS = ['/get', '/describe', '/delete', '/pause', '/resume', '/confirm', '/label', '/approve', '/deny', '/wait', '/rollout/status', '/node/reapply', '/node/revoke'];

interface Node {
  path: string;
  subcommands: string[];
  options: string[];
  valueOptions: string[];
  words: string[];
}

function walk(cmd: Command, path: string, out: Node[]): void {
  const visible = cmd.commands.filter((c) => c.name() !== 'help' && !(c as unknown as { _hidden: boolean })._hidden);
  // The connection flags, hidden on each verb, complete everywhere through the program's ('');
  // --timeout's old meaning (hidden too) is not offered.
  const shown = cmd.options.filter((o) => (!o.hidden || path === '') && o.description !== 'old name of --request-timeout');
  const options = shown.flatMap((o) => [o.short, o.long].filter((f): f is string => !!f));
  const valueOptions = cmd.options.filter((o) => o.required || o.optional).flatMap((o) => [o.short, o.long].filter((f): f is string => !!f));
  const words = cmd.registeredArguments.flatMap((a) => ARGUMENT_WORDS[a.name()] ?? []);
  out.push({ path, subcommands: visible.map((c) => c.name()), options: [...options, '--help'], valueOptions, words });
  for (const sub of visible) walk(sub, `${path}/${sub.name()}`, out);
}

const caseLines = (nodes: Node[], pick: (n: Node) => string[]): string =>
  nodes.map((n) => `    '${n.path}') echo '${pick(n).join(' ')}' ;;`).join('\n');

/** The data both shells share, as plain functions of the command path ("", "/get", "/rollout/status"). */
function dataFunctions(program: Command): string {
  const nodes: Node[] = [];
  walk(program, '', nodes);
  // Options given before the verb are the program's: known on every path.
  const shortToLong = new Map<string, string>();
  const collect = (cmd: Command): void => {
    for (const o of cmd.options) if (o.short && o.long) shortToLong.set(o.short, o.long);
    cmd.commands.forEach(collect);
  };
  collect(program);
  return `_mcctl_subcommands() {
  case "$1" in
${caseLines(nodes, (n) => n.subcommands)}
  esac
}
_mcctl_options() {
  case "$1" in
${caseLines(nodes, (n) => n.options)}
  esac
}
_mcctl_value_options() {
  case "$1" in
${caseLines(nodes, (n) => n.valueOptions)}
  esac
}
_mcctl_words() {
  case "$1" in
${caseLines(nodes, (n) => n.words)}
  esac
}
# What the value of option $1 completes to: "file", or words.
_mcctl_option_values() {
  case "$1" in
${[...FILE_OPTIONS].map((o) => `    ${[o, ...[...shortToLong].filter(([, l]) => l === o).map(([s]) => s)].join('|')}) echo file ;;`).join('\n')}
${Object.entries(OPTION_VALUES).map(([o, v]) => `    ${[o, ...[...shortToLong].filter(([, l]) => l === o).map(([s]) => s)].join('|')}) echo '${v.join(' ')}' ;;`).join('\n')}
  esac
}
# The command path of words 1..N-1 ($@): verbs only, skipping options and their values.
_mcctl_path() {
  local p="" prev="" w
  for w in "$@"; do
    # The value of an option that takes one ("-o yaml") is not a verb.
    if [[ -n "$prev" && " $(_mcctl_value_options "$p") $(_mcctl_value_options "") " == *" $prev "* ]]; then
      prev=""; continue
    fi
    prev="$w"
    [[ "$w" == -* ]] && continue
    if [[ " $(_mcctl_subcommands "$p") " == *" $w "* ]]; then p="$p/$w"; fi
  done
  echo "$p"
}`;
}

export function completionScript(program: Command, shell: string): string {
  if (shell === 'bash') return bashScript(program);
  if (shell === 'zsh') return zshScript(program);
  if (shell === 'fish') return fishScript(program);
  throw new ConfigurationError(`completion: unsupported shell "${shell}"; use bash, zsh or fish`);
}

function bashScript(program: Command): string {
  return `# bash completion for mcctl, generated by \`mcctl completion bash\`.
# Load it in this shell:   source <(mcctl completion bash)
# or for every shell:      mcctl completion bash > /etc/bash_completion.d/mcctl
${dataFunctions(program)}
_mcctl() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local cmdpath values
  cmdpath="$(_mcctl_path "\${COMP_WORDS[@]:1:COMP_CWORD-1}")"
  if [[ " $(_mcctl_value_options "$cmdpath") $(_mcctl_value_options "") " == *" $prev "* ]]; then
    values="$(_mcctl_option_values "$prev")"
    if [[ "$values" == file ]]; then COMPREPLY=($(compgen -f -- "$cur")); else COMPREPLY=($(compgen -W "$values" -- "$cur")); fi
    return
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(_mcctl_options "$cmdpath") $(_mcctl_options "")" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$(_mcctl_subcommands "$cmdpath") $(_mcctl_words "$cmdpath")" -- "$cur"))
    if [[ " ${NAME_PATHS.join(' ')} " == *" $cmdpath "* ]]; then
      COMPREPLY+=($("\${COMP_WORDS[0]}" __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
    fi
  fi
  [[ "\${COMPREPLY[0]}" == */ || "\${COMPREPLY[0]}" == *= ]] && compopt -o nospace 2>/dev/null
  return 0
}
complete -F _mcctl mcctl
`;
}

function zshScript(program: Command): string {
  return `#compdef mcctl
# zsh completion for mcctl, generated by \`mcctl completion zsh\`.
# Load it in this shell:   source <(mcctl completion zsh)
# or for every shell:      mcctl completion zsh > "\${fpath[1]}/_mcctl"
${dataFunctions(program)}
_mcctl() {
  local cur="\${words[CURRENT]}" prev="\${words[CURRENT-1]}"
  local cmdpath values
  cmdpath="$(_mcctl_path "\${(@)words[2,CURRENT-1]}")"
  if [[ " $(_mcctl_value_options "$cmdpath") $(_mcctl_value_options "") " == *" $prev "* ]]; then
    values="$(_mcctl_option_values "$prev")"
    if [[ "$values" == file ]]; then _files; else compadd -S '' -- \${=values}; fi
    return
  fi
  if [[ "$cur" == -* ]]; then
    compadd -- \${=$(_mcctl_options "$cmdpath")} \${=$(_mcctl_options "")}
  else
    compadd -- \${=$(_mcctl_subcommands "$cmdpath")}
    compadd -S '' -- \${=$(_mcctl_words "$cmdpath")}
    if [[ " ${NAME_PATHS.join(' ')} " == *" $cmdpath "* ]]; then
      compadd -- \${(f)"$("\${words[1]}" __complete "\${(@)words[2,CURRENT]}" 2>/dev/null)"}
    fi
  fi
}
if (( $+functions[compdef] )); then compdef _mcctl mcctl; fi
`;
}

/** fish: the same data as fish functions, one word a line; fish filters by the typed prefix. */
function fishScript(program: Command): string {
  const nodes: Node[] = [];
  walk(program, '', nodes);
  const shortToLong = new Map<string, string>();
  const collect = (cmd: Command): void => {
    for (const o of cmd.options) if (o.short && o.long) shortToLong.set(o.short, o.long);
    cmd.commands.forEach(collect);
  };
  collect(program);
  const quote = (w: string): string => `'${w.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  const switchOf = (name: string, pick: (n: Node) => string[]): string => `function ${name}
    switch "$argv[1]"
${nodes.filter((n) => pick(n).length).map((n) => `        case ${quote(n.path)}\n            printf '%s\\n' ${pick(n).map(quote).join(' ')}`).join('\n')}
    end
end`;
  const aliases = (o: string): string[] => [o, ...[...shortToLong].filter(([, l]) => l === o).map(([sh]) => sh)];
  return `# fish completion for mcctl, generated by \`mcctl completion fish\`.
# Load it in this shell:   mcctl completion fish | source
# or for every shell:      mcctl completion fish > ~/.config/fish/completions/mcctl.fish
${switchOf('__mcctl_subcommands', (n) => n.subcommands)}
${switchOf('__mcctl_options', (n) => n.options)}
${switchOf('__mcctl_value_options', (n) => n.valueOptions)}
${switchOf('__mcctl_words', (n) => n.words)}
function __mcctl_option_values
    switch "$argv[1]"
${[...FILE_OPTIONS].map((o) => `        case ${aliases(o).map(quote).join(' ')}\n            echo file`).join('\n')}
${Object.entries(OPTION_VALUES).map(([o, v]) => `        case ${aliases(o).map(quote).join(' ')}\n            printf '%s\\n' ${v.map(quote).join(' ')}`).join('\n')}
    end
end
# The command path of the words before the cursor: verbs only, skipping options and their values.
function __mcctl_path
    set -l p ''
    set -l prev ''
    for w in $argv
        if test -n "$prev"; and contains -- $prev (__mcctl_value_options $p) (__mcctl_value_options '')
            set prev ''
            continue
        end
        set prev $w
        string match -q -- '-*' $w; and continue
        if contains -- $w (__mcctl_subcommands $p)
            set p "$p/$w"
        end
    end
    echo $p
end
function __mcctl_complete
    set -l tokens (commandline -opc)
    set -l cur (commandline -ct)
    set -l p (__mcctl_path $tokens[2..-1])
    set -l prev $tokens[-1]
    if test (count $tokens) -gt 1; and contains -- $prev (__mcctl_value_options $p) (__mcctl_value_options '')
        set -l values (__mcctl_option_values $prev)
        if test "$values" = file
            __fish_complete_path $cur
        else
            printf '%s\n' $values
        end
        return
    end
    if string match -q -- '-*' $cur
        __mcctl_options $p
        __mcctl_options ''
        return
    end
    __mcctl_subcommands $p
    __mcctl_words $p
    if contains -- $p ${NAME_PATHS.map(quote).join(' ')}
        $tokens[1] __complete $tokens[2..-1] $cur 2>/dev/null
    end
end
complete -c mcctl -f -a '(__mcctl_complete)'
`;
}
