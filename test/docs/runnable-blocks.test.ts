// Every command the docs show runs here, so the docs cannot rot. One real mcplane-server (SQLite,
// loopback TLS, port 0) serves them all; each page's blocks run in order in one bash (set -euo
// pipefail) in a directory of its own, with `mcctl` and `mcplane-server` on PATH as the programs
// the tests start (the bundles under npm test), MCPLANE_SERVER and MCPLANE_PKI_DIR pointing at the
// server, and D its data directory. Two simulated agents, worker-0 (zone z1) and worker-7 (z2) in
// pool worker, are connected, so the pages can show nodes.
//
// Two kinds of block run:
// - `sh runnable`: a script; it must exit 0.
// - `console runnable`: a transcript, `$ command` lines each followed by what it printed. Each
//   command runs, and the first line it prints (stdout and stderr together) must be the one the
//   page shows: a table's header word for word, any other line with numbers, hashes, addresses
//   and ages taken as variable. A shown `error:` line means the command must fail; otherwise it
//   must exit 0. A transcript whose first output line is `...` shows no output to compare.
// A block that cannot run here (root, rpm-ostree, a fleet, a cluster) says why in its info string,
// `sh not-runnable: <reason>` or `console not-runnable: <reason>`. Any fenced block with a `$ `
// prompt line, whatever its info string, and every sh/bash/shell/console block must be one of
// these: an unmarked one fails the first test, so a new command in the docs has to choose
// (docs/README.md).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import { programArgs, REPO_ROOT } from '../helpers/run-cli.ts';
import { spawnServer, type ServerProcess } from '../helpers/server-process.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { testPki } from '../helpers/test-pki.ts';
import { scaled } from '../helpers/time-scale.ts';

const DOCS = join(REPO_ROOT, 'docs');

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return markdownFiles(path);
    return name.endsWith('.md') ? [path] : [];
  }).sort();
}

/** Info-string languages whose blocks are shell commands: each must be runnable or say why not. */
const SHELL = new Set(['sh', 'bash', 'shell', 'console']);

/** One `$ command` of a transcript and the lines the page shows it printing. */
export interface TranscriptStep { command: string; output: string[] }

type ShellBlock = { line: number; code: string } & ({ kind: 'runnable' } | { kind: 'transcript'; steps: TranscriptStep[] } | { kind: 'not-runnable'; reason: string } | { kind: 'unmarked'; info: string });

/** A transcript's `$ ` commands (a trailing backslash continues one) and each one's output lines. */
export function transcriptSteps(code: string): TranscriptStep[] {
  const steps: TranscriptStep[] = [];
  const lines = code.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.startsWith('$ ')) {
      if (steps.length) steps.at(-1)!.output.push(lines[i]!);
      continue;
    }
    let command = lines[i]!.slice(2);
    // A trailing backslash continues the command; bash reads it (and the newline) as a space.
    while (command.endsWith('\\') && i + 1 < lines.length) command = `${command}\n${lines[++i]}`;
    steps.push({ command, output: [] });
  }
  for (const step of steps) while (step.output.length && step.output.at(-1)!.trim() === '') step.output.pop();
  return steps;
}

/** The command blocks of a Markdown page, in order, with the line each starts on and its marker. */
export function shellBlocks(text: string): ShellBlock[] {
  const blocks: ShellBlock[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    // A fence may be indented (a block inside a list item); its lines lose that indentation.
    const open = /^( *)(`{3,})(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!;
    const fence = open[2]!;
    const info = open[3]!.trim();
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i]!.trimStart().startsWith(fence); i++) body.push(lines[i]!.startsWith(indent) ? lines[i]!.slice(indent.length) : lines[i]!);
    const [lang = '', ...rest] = info.split(/\s+/);
    // A prompt makes any block a command block, a bare fence's too: commands hide there as well.
    if (!SHELL.has(lang) && !body.some((l) => l.startsWith('$ '))) continue;
    const block = { line: start + 1, code: body.join('\n') };
    const marker = rest.join(' ');
    if (marker === 'runnable' && lang === 'console') blocks.push({ ...block, kind: 'transcript', steps: transcriptSteps(block.code) });
    else if (marker === 'runnable' && SHELL.has(lang)) blocks.push({ ...block, kind: 'runnable' });
    else if (/^not-runnable: \S/.test(marker)) blocks.push({ ...block, kind: 'not-runnable', reason: marker.slice('not-runnable: '.length).trim() });
    else blocks.push({ ...block, kind: 'unmarked', info });
  }
  return blocks;
}

/**
 * A transcript line with what changes from run to run taken out: rendered-config hashes and other
 * long hex, addresses, versions, times, ages and durations; runs of spaces are one space. Other numbers
 * stay: a count of problems is part of what the page claims.
 */
export function comparable(line: string): string {
  return line.trim()
    .replace(/\b[0-9a-f]{8,}\b/g, '<hex>')
    .replace(/\b(\d{1,3}\.){3}\d{1,3}(:\d+)?\b/g, '<address>')
    // The version a build reports: 0.1.0-dev from source, 0.1.0 from a bundle or a package.
    .replace(/\b\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?\b/g, '<version>')
    .replace(/\b\d\d:\d\d:\d\d(\.\d+)?Z?\b/g, '<time>')
    .replace(/\b(\d+(\.\d+)?(ms|[smhd]))+\b/g, '<age>')
    .replace(/\s+/g, ' ');
}

/** A table's header: two or more upper-case words. Compared word for word, spacing aside. */
const isHeader = (line: string): boolean => /^[A-Z][A-Z0-9-]*( +[A-Z][A-Z0-9-]*)+$/.test(line.trim());

/** Why a transcript step's real run does not match the page, or undefined when it does. */
export function transcriptMismatch(step: TranscriptStep, status: number, output: string): string | undefined {
  const shown = step.output.find((l) => l.trim() !== '');
  const got = output.split('\n').find((l) => l.trim() !== '') ?? '';
  const fails = shown !== undefined && shown.startsWith('error:');
  if (fails && status === 0) return `the page shows it failing (${shown}), but it exited 0`;
  if (!fails && status !== 0) return `it exited ${status}, and the page shows no error`;
  if (shown === undefined || shown.trim() === '...') return undefined;
  if (fails) {
    // An error is the docs' promise of what the user reads: every line shown, up to a `...`.
    const lines = step.output.slice(step.output.indexOf(shown));
    const end = lines.findIndex((l) => l.trim() === '...');
    const expected = (end < 0 ? lines : lines.slice(0, end)).map(comparable);
    const all = output.split('\n');
    const real = all.slice(all.indexOf(got)).map(comparable).slice(0, expected.length);
    const at = expected.findIndex((l, i) => l !== real[i]);
    return at < 0 ? undefined : `its error differs from the page's at line ${at + 1}:\n  page: ${expected[at]}\n  real: ${real[at] ?? '<end>'}`;
  }
  if (isHeader(shown)) return shown.trim().split(/\s+/).join(' ') === got.trim().split(/\s+/).join(' ') ? undefined : `its header is not the page's:\n  page: ${shown.trim()}\n  real: ${got.trim()}`;
  return comparable(shown) === comparable(got) ? undefined : `its first line is not the page's:\n  page: ${shown.trim()}\n  real: ${got.trim()}`;
}

const allPages = markdownFiles(DOCS).map((path) => ({ path, name: relative(REPO_ROOT, path), shell: shellBlocks(readFileSync(path, 'utf8')) }));
const allBlocks = allPages.flatMap((p) => p.shell.map((b) => ({ ...b, page: p.name })));
const counts = { runnable: 0, transcript: 0, 'not-runnable': 0, unmarked: 0 };
for (const b of allBlocks) counts[b.kind]++;

const pages = allPages
  .map((p) => ({ ...p, blocks: p.shell.filter((b) => b.kind === 'runnable' || b.kind === 'transcript') }))
  .filter((p) => p.blocks.length > 0);

let work: string;
let bin: string;
let dataDir: string;
let pkiDir: string;
let server: ServerProcess;
let agents: SimulatedAgent[] = [];

before(async () => {
  const pki = await testPki();
  pkiDir = pki.dir;
  work = mkdtempSync(join(tmpdir(), 'mcplane-docs-'));
  dataDir = join(work, 'data');
  server = await spawnServer(['--data-dir', dataDir, '--listen', '127.0.0.1:0', '--pki-dir', pkiDir, '--no-bootstrap']);
  // worker-0 and worker-7 in zones z1 and z2: the nodes the pages' transcripts show.
  for (const [name, zone] of [['worker-0', 'z1'], ['worker-7', 'z2']] as const) {
    const agent = new SimulatedAgent({ address: server.address, tls: await pki.node(name), name, labels: { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': zone }, autoDone: true });
    await agent.connect();
    agents.push(agent);
  }
  // The programs as the tests start them, callable by name from any directory: paths made
  // absolute, and tsx (when running from source) by its file URL.
  bin = join(work, 'bin');
  mkdirSync(bin);
  for (const program of ['mcctl', 'mcplane-server'] as const) {
    const args = programArgs(program).map((a) => (a === 'tsx' ? import.meta.resolve('tsx') : /\.(ts|cjs)$/.test(a) ? join(REPO_ROOT, a) : a));
    writeFileSync(join(bin, program), `#!/bin/sh\nexec ${[process.execPath, ...args].map((a) => `'${a}'`).join(' ')} "$@"\n`);
    chmodSync(join(bin, program), 0o755);
  }
});

after(async () => {
  for (const agent of agents) agent.close();
  server?.child.kill('SIGTERM');
  await server?.exited;
});

interface PageRun {
  status: number | null;
  output: string;
  /** Each transcript step's exit status and output, in the page's order. */
  steps: { block: number; step: TranscriptStep; status: number; output: string }[];
}

function runPage(page: (typeof pages)[number]): Promise<PageRun> {
  const dir = join(work, page.name.replace(/[/.]/g, '_'));
  mkdirSync(dir);
  const captured = join(dir, '.transcript');
  mkdirSync(captured);
  // Pages refer to the repository's example manifests as examples/, as from a clone.
  symlinkSync(join(REPO_ROOT, 'examples'), join(dir, 'examples'));
  const steps: PageRun['steps'] = [];
  const script = ['set -euo pipefail', ...page.blocks.map((b) => {
    const head = `echo '--- ${page.name}:${b.line}'`;
    if (b.kind !== 'transcript') return `${head}\n${b.code}`;
    // Each command of a transcript runs with its output and status kept for the comparison, and
    // a failure does not stop the page: the comparison says whether it should have failed.
    return [head, ...b.steps.map((step) => {
      const n = steps.push({ block: b.line, step, status: -1, output: '' }) - 1;
      return `set +e\n{\n${step.command}\n} >'${captured}/${n}.out' 2>&1 </dev/null\necho $? >'${captured}/${n}.status'\nset -e`;
    })].join('\n');
  })].join('\n');
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], {
      cwd: dir,
      env: {
        PATH: `${bin}:${process.env.PATH}`,
        HOME: dir,
        MCPLANE_SERVER: server.address,
        MCPLANE_PKI_DIR: pkiDir,
        D: dataDir,
        // No terminal: plain output, no colours or redraws.
        TERM: 'dumb',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => { output += d; });
    child.stderr.on('data', (d) => { output += d; });
    child.on('error', reject);
    child.on('close', (status) => {
      for (const [n, s] of steps.entries()) {
        if (!existsSync(join(captured, `${n}.status`))) continue;
        s.status = Number(readFileSync(join(captured, `${n}.status`), 'utf8'));
        s.output = readFileSync(join(captured, `${n}.out`), 'utf8');
      }
      resolve({ status, output, steps });
    });
  });
}

test(`docs/: ${allBlocks.length} command blocks, ${counts.runnable} runnable scripts, ${counts.transcript} runnable transcripts, ${counts['not-runnable']} not-runnable with a reason, ${counts.unmarked} unmarked`, (t) => {
  const reasons = new Map<string, string[]>();
  for (const b of allBlocks) if (b.kind === 'not-runnable') reasons.set(b.reason, [...(reasons.get(b.reason) ?? []), `${b.page}:${b.line}`]);
  for (const [reason, where] of reasons) t.diagnostic(`not-runnable: ${reason} (${where.join(', ')})`);
  const unmarked = allBlocks.filter((b) => b.kind === 'unmarked').map((b) => `${b.page}:${b.line} \`\`\`${b.kind === 'unmarked' ? b.info : ''}`);
  assert.deepEqual(unmarked, [], 'each command block in docs/ is `sh runnable`, `console runnable`, or `sh|console not-runnable: <reason>` (docs/README.md)');
});

test('the docs mark commands runnable, on more than one page', () => {
  assert.ok(pages.length >= 4, `pages with runnable blocks: ${pages.map((p) => p.name).join(', ')}`);
});

test('a transcript step matches the page only when the real run does', () => {
  const step = (output: string[]): TranscriptStep => ({ command: 'mcctl get pools', output });
  const header = ['NAME     CONFIG   UPDATED'];
  assert.equal(transcriptMismatch(step(header), 0, 'NAME CONFIG UPDATED\nworker x True\n'), undefined);
  assert.match(transcriptMismatch(step(header), 0, 'NAME CONFIG\n')!, /header is not the page's/);
  assert.match(transcriptMismatch(step(header), 1, 'error: no server\n')!, /exited 1/);
  assert.match(transcriptMismatch(step(['error: cannot list pools: no']), 0, 'NAME\n')!, /shows it failing/);
  assert.equal(transcriptMismatch(step(['server: 0.1.0 (at 127.0.0.1:4242, replica local)']), 0, 'server: 0.1.0 (at 127.0.0.1:39001, replica local)'), undefined);
  assert.match(transcriptMismatch(step(['error: invalid document: 2 problems', '  - a', '  - b']), 1, 'error: invalid document: 2 problems\n  - a\n  - c\n')!, /at line 3/);
  assert.match(transcriptMismatch(step(['error: invalid document: 2 problems']), 1, 'error: invalid document: 3 problems\n')!, /at line 1/);
  assert.equal(transcriptMismatch(step(['error: x', '...', '  - z']), 1, 'error: x\n  - y\n'), undefined);
  assert.match(transcriptMismatch(step(['client: 0.1.0']), 0, 'version: 0.1.0')!, /first line is not the page's/);
  assert.equal(transcriptMismatch(step(['client: 0.1.0-dev']), 0, 'client: 0.1.0'), undefined);
  assert.equal(transcriptMismatch(step(['...']), 0, 'anything'), undefined);
  assert.deepEqual(transcriptSteps('$ mcctl get \\\n  pools\nNAME\n\n$ mcctl version\n'), [{ command: 'mcctl get \\\n  pools', output: ['NAME'] }, { command: 'mcctl version', output: [] }]);
});

for (const page of pages) {
  const scripts = page.blocks.filter((b) => b.kind === 'runnable').length;
  const transcripts = page.blocks.length - scripts;
  test(`${page.name}: its ${scripts} runnable script(s) exit 0 and its ${transcripts} transcript(s) print what the page shows`, { timeout: scaled(120_000) }, async () => {
    const r = await runPage(page);
    assert.equal(r.status, 0, `a runnable block in ${page.name} failed (the last --- line names it):\n${r.output}`);
    const mismatches = r.steps.flatMap((s) => {
      const why = transcriptMismatch(s.step, s.status, s.output);
      return why ? [`${page.name}:${s.block} $ ${s.step.command}\n  ${why}\n  (it printed:\n${s.output.split('\n').slice(0, 6).map((l) => `    ${l}`).join('\n')})`] : [];
    });
    assert.deepEqual(mismatches, [], `transcripts in ${page.name} that no longer match what the commands print`);
  });
}
