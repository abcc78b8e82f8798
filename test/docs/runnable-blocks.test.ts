// Every code block in docs/ whose info string is `sh runnable` runs here, so the commands the docs
// show cannot rot. One real mcplane-server (SQLite, loopback TLS, port 0) serves them all; each
// page's blocks run in order in one bash (set -euo pipefail) in a directory of its own, with
// `mcctl` and `mcplane-server` on PATH as the programs the tests start (the bundles under
// npm test), MCPLANE_SERVER and MCPLANE_PKI_DIR pointing at the server, and D its data directory.
// One simulated agent, worker-7 in pool worker, is connected, so the pages can show a node.
// A shell block that cannot run here (root, rpm-ostree, a fleet, a cluster) says why in its info
// string, `sh not-runnable: <reason>`; a shell block (sh, bash, shell, console) with neither marker
// fails the first test, so a new command in the docs has to choose (docs/README.md).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import { programArgs, REPO_ROOT } from '../helpers/run-cli.ts';
import { spawnServer, type ServerProcess } from '../helpers/server-process.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { testPki } from '../helpers/test-pki.ts';

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

type ShellBlock = { line: number; code: string } & ({ kind: 'runnable' } | { kind: 'not-runnable'; reason: string } | { kind: 'unmarked'; info: string });

/** The shell blocks of a Markdown page, in order, with the line each starts on and its marker. */
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
    if (!SHELL.has(lang)) continue;
    const block = { line: start + 1, code: body.join('\n') };
    const marker = rest.join(' ');
    // `console` blocks hold prompts and output, not a script: they can only say why not.
    if (marker === 'runnable' && lang !== 'console') blocks.push({ ...block, kind: 'runnable' });
    else if (/^not-runnable: \S/.test(marker)) blocks.push({ ...block, kind: 'not-runnable', reason: marker.slice('not-runnable: '.length).trim() });
    else blocks.push({ ...block, kind: 'unmarked', info });
  }
  return blocks;
}

const allPages = markdownFiles(DOCS).map((path) => ({ path, name: relative(REPO_ROOT, path), shell: shellBlocks(readFileSync(path, 'utf8')) }));
const allBlocks = allPages.flatMap((p) => p.shell.map((b) => ({ ...b, page: p.name })));
const counts = { runnable: 0, 'not-runnable': 0, unmarked: 0 };
for (const b of allBlocks) counts[b.kind]++;

const pages = allPages
  .map((p) => ({ ...p, blocks: p.shell.filter((b) => b.kind === 'runnable') }))
  .filter((p) => p.blocks.length > 0);

let work: string;
let bin: string;
let dataDir: string;
let pkiDir: string;
let server: ServerProcess;
let agent: SimulatedAgent;

before(async () => {
  const pki = await testPki();
  pkiDir = pki.dir;
  work = mkdtempSync(join(tmpdir(), 'mcplane-docs-'));
  dataDir = join(work, 'data');
  server = await spawnServer(['--data-dir', dataDir, '--listen', '127.0.0.1:0', '--pki-dir', pkiDir, '--no-bootstrap']);
  agent = new SimulatedAgent({ address: server.address, tls: await pki.node('worker-7'), name: 'worker-7', labels: { 'node-role.kubernetes.io/worker': '' }, autoDone: true });
  await agent.connect();
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
  agent?.close();
  server?.child.kill('SIGTERM');
  await server?.exited;
});

function runPage(page: (typeof pages)[number]): Promise<{ status: number | null; output: string }> {
  const dir = join(work, page.name.replace(/[/.]/g, '_'));
  mkdirSync(dir);
  // Pages refer to the repository's example manifests as examples/, as from a clone.
  symlinkSync(join(REPO_ROOT, 'examples'), join(dir, 'examples'));
  const script = ['set -euo pipefail', ...page.blocks.map((b) => `echo '--- ${page.name}:${b.line}'\n${b.code}`)].join('\n');
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
    child.on('close', (status) => resolve({ status, output }));
  });
}

test(`docs/: ${allBlocks.length} shell blocks, ${counts.runnable} runnable, ${counts['not-runnable']} not-runnable with a reason, ${counts.unmarked} unmarked`, (t) => {
  const reasons = new Map<string, string[]>();
  for (const b of allBlocks) if (b.kind === 'not-runnable') reasons.set(b.reason, [...(reasons.get(b.reason) ?? []), `${b.page}:${b.line}`]);
  for (const [reason, where] of reasons) t.diagnostic(`not-runnable: ${reason} (${where.join(', ')})`);
  const unmarked = allBlocks.filter((b) => b.kind === 'unmarked').map((b) => `${b.page}:${b.line} \`\`\`${b.kind === 'unmarked' ? b.info : ''}`);
  assert.deepEqual(unmarked, [], 'each shell block in docs/ is `sh runnable` or `sh not-runnable: <reason>` (docs/README.md)');
});

test('the docs mark commands runnable, on more than one page', () => {
  assert.ok(pages.length >= 4, `pages with runnable blocks: ${pages.map((p) => p.name).join(', ')}`);
});

for (const page of pages) {
  test(`${page.name}: its ${page.blocks.length} runnable block(s) run and exit 0`, { timeout: 120_000 }, async () => {
    const r = await runPage(page);
    assert.equal(r.status, 0, `a runnable block in ${page.name} failed (the last --- line names it):\n${r.output}`);
  });
}
