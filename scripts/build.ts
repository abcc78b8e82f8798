// npm run build: one self-contained CommonJS bundle per program in dist/bundle/, plus every
// .proto file read at run time, laid out so that each package finds its own relative to the
// bundle (grpc-health-check and @grpc/reflection load theirs from __dirname).

import { build, type Plugin } from 'esbuild';
import { cpSync, mkdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
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
      // esbuild resolves links: a node_modules that is a link (a worktree sharing another
      // checkout's) is compared as the directory it points at.
      const rel = relative(realpathSync(join(ROOT, 'node_modules')), dirname(args.path));
      const contents = readFileSync(args.path, 'utf8').replaceAll('__dirname', `require('path').join(__dirname, 'node_modules', ${JSON.stringify(rel)})`);
      return { contents, loader: 'js' };
    });
  },
};

export async function buildBundles(): Promise<string> {
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  await build({
    entryPoints: {
      'mcplane-agent': join(ROOT, 'src/agent/main.ts'),
      'mcplane-server': join(ROOT, 'src/controlplane/main.ts'),
      mcctl: join(ROOT, 'src/cli/main.ts'),
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
  cpSync(join(ROOT, 'proto'), join(OUT, 'proto'), { recursive: true });
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
  console.log(`built ${relative(ROOT, out)}: mcplane-agent.cjs, mcplane-server.cjs, mcctl.cjs, proto/ (version ${VERSION})`);
}
