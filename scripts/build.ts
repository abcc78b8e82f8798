// npm run build: one self-contained CommonJS bundle per program in dist/bundle/ (mcctl: a loader
// and an ES module split into chunks under dist/bundle/mcctl/), plus every .proto file read at run
// time, laid out so that each package finds its own relative to the bundle (grpc-health-check and
// @grpc/reflection load theirs from __dirname).

import { build, type Plugin } from 'esbuild';
import { cpSync, existsSync, mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import protobuf from 'protobufjs';
import { LOADER_OPTIONS, PARSED_PROTO_FILE, PROTO_FILES } from '../src/runtime/proto.ts';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'dist', 'bundle');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/** Packages that read files relative to their own source: their __dirname is pointed at a
 * copy of that package's layout under the bundle directory. */
const DIRNAME_PACKAGES = ['grpc-health-check', '@grpc/reflection'];

const packageDirname: Plugin = {
  name: 'package-dirname',
  setup(b) {
    b.onLoad({ filter: /node_modules[\\/](grpc-health-check|@grpc[\\/]reflection)[\\/].*\.js$/ }, (args) => {
      // esbuild gives real paths: node_modules may be a symbolic link (a git worktree sharing one).
      const rel = relative(realpathSync(join(ROOT, 'node_modules')), dirname(args.path));
      const contents = readFileSync(args.path, 'utf8').replaceAll('__dirname', `require('path').join(__dirname, 'node_modules', ${JSON.stringify(rel)})`);
      return { contents, loader: 'js' };
    });
  },
};

/**
 * mcctl starts often and runs briefly, so most of its time went to compiling its bundle. Node's
 * compile cache (module.enableCompileCache) keeps V8's code for it between runs; it applies to
 * modules loaded after it is turned on, hence this loader in front of the program. The cache is
 * per user (never a shared /tmp directory, where another user could plant code); where it cannot
 * be written, mcctl runs as before. The program is an ES module in chunks (mcctlBuild says why),
 * so the loader imports it.
 */
const MCCTL_LOADER = `'use strict';
// mcctl: turns on Node's compile cache, then runs the program (scripts/build.ts says why).
const { join } = require('node:path');
const home = require('node:os').homedir();
const cache = process.env.XDG_CACHE_HOME || (home && join(home, '.cache'));
try {
  if (cache && process.env.MCCTL_NO_COMPILE_CACHE !== '1') require('node:module').enableCompileCache?.(join(cache, 'mcplane', 'mcctl-compile-cache'));
} catch { /* no cache: only slower */ }
import('./mcctl/main.mjs');
`;

/** The mcplane contract parsed once here, as protobufjs' JSON, for the bundles to load (runtime/proto.ts). */
function writeParsedProto(file: string): void {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (existsSync(join(ROOT, 'proto', target)) ? join(ROOT, 'proto', target) : target);
  // proto-loader's own well-known types (google/protobuf/*.proto), as its loadSync adds them.
  root.loadSync(PROTO_FILES, { keepCase: LOADER_OPTIONS.keepCase });
  writeFileSync(file, JSON.stringify(root.toJSON()));
}

/** Where mcctl's chunks go, under dist/bundle (scripts/package.ts copies the directory). */
export const MCCTL_DIR = 'mcctl';

/**
 * mcctl as an ES module split into chunks: each command's dynamic import() in src/cli/main.ts
 * becomes a file of its own, loaded only when that command runs. As one CommonJS file (esbuild
 * splits only ES modules) every run read and compiled all 5 MB of it, most of it
 * @kubernetes/client-node for `mcctl import`, to list three pools. Chunks keep CommonJS's
 * require (for the node: built-ins the bundled packages require) and __dirname/__filename, each
 * its own file's, through the banner.
 */
async function mcctlBuild(): Promise<void> {
  await build({
    entryPoints: { main: join(ROOT, 'src/cli/main.ts') },
    outdir: join(OUT, MCCTL_DIR),
    outExtension: { '.js': '.mjs' },
    chunkNames: '[name]-[hash]',
    bundle: true,
    splitting: true,
    platform: 'node',
    target: 'node24',
    format: 'esm',
    minifyWhitespace: true,
    minifySyntax: true,
    keepNames: true,
    legalComments: 'none',
    logLevel: 'warning',
    define: {
      __MCPLANE_BUNDLED__: 'true',
      __MCPLANE_VERSION__: JSON.stringify(VERSION),
    },
    banner: {
      js: "import{createRequire as __mcplaneCreateRequire}from'node:module';import{fileURLToPath as __mcplaneFileURLToPath}from'node:url';" +
        "const require=__mcplaneCreateRequire(import.meta.url),__filename=__mcplaneFileURLToPath(import.meta.url),__dirname=__mcplaneFileURLToPath(new URL('.',import.meta.url));",
    },
  });
}

export async function buildBundles(): Promise<string> {
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  await build({
    entryPoints: {
      'mcplane-agent': join(ROOT, 'src/agent/main.ts'),
      'mcplane-server': join(ROOT, 'src/controlplane/main.ts'),
    },
    outdir: OUT,
    outExtension: { '.js': '.cjs' },
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'cjs',
    // Whitespace and syntax only: identifiers stay, so stack traces still read.
    minifyWhitespace: true,
    minifySyntax: true,
    keepNames: true,
    legalComments: 'none',
    logLevel: 'warning',
    define: {
      'import.meta.url': '__mcplaneImportMetaUrl',
      __MCPLANE_BUNDLED__: 'true',
      __MCPLANE_VERSION__: JSON.stringify(VERSION),
    },
    banner: { js: "const __mcplaneImportMetaUrl = require('url').pathToFileURL(__filename).href;" },
    plugins: [packageDirname],
  });
  await mcctlBuild();
  cpSync(join(ROOT, 'proto'), join(OUT, 'proto'), { recursive: true });
  writeParsedProto(join(OUT, PARSED_PROTO_FILE));
  // The contract beside the chunk that reads it (runtime/proto.ts looks beside its own module).
  cpSync(join(OUT, PARSED_PROTO_FILE), join(OUT, MCCTL_DIR, PARSED_PROTO_FILE));
  writeFileSync(join(OUT, 'mcctl.cjs'), MCCTL_LOADER);
  for (const pkg of DIRNAME_PACKAGES) {
    const from = join(ROOT, 'node_modules', pkg);
    for (const protoDir of ['proto', 'build/proto']) {
      try {
        cpSync(join(from, protoDir), join(OUT, 'node_modules', pkg, protoDir), { recursive: true, filter: (src) => !src.includes(`${protoDir}/sample`) });
      } catch { /* this package keeps its protos in the other place */ }
    }
  }
  return OUT;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const out = await buildBundles();
  console.log(`built ${relative(ROOT, out)}: mcplane-agent.cjs, mcplane-server.cjs, mcctl.cjs (and mcctl/), proto/ (version ${VERSION})`);
}
