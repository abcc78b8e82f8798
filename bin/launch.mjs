// Shared by the bin launchers (mcctl, mcplane-server, mcplane-agent) that package.json declares.
// In a checkout with dev dependencies it runs the TypeScript source through tsx, so what runs is
// what is in src/. In an installed package (npm pack / npm install of the tarball: `files`
// holds bin/ and dist/bundle/, and prepack runs `npm run build`) it runs the esbuild bundle,
// which needs nothing else from node_modules.

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

export async function launch(program, sourcePath) {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 24) {
    process.stderr.write(`${program}: needs Node.js 24 or later; ${process.execPath} is ${process.version}. ` +
      'Put Node 24 first on PATH (in a checkout, `npm run` scripts do), or install the RPM, which carries its own.\n');
    process.exit(1);
  }
  const source = join(ROOT, sourcePath);
  if (existsSync(source) && (await registerTsx())) {
    // The programs start themselves when they are the script being run (isEntryPoint).
    process.argv[1] = source;
    await import(pathToFileURL(source).href);
    return;
  }
  const bundle = join(ROOT, 'dist', 'bundle', `${program}.cjs`);
  if (existsSync(bundle)) {
    createRequire(import.meta.url)(bundle);
    return;
  }
  process.stderr.write(`${program}: found neither ${bundle} (run \`npm run build\`) nor the TypeScript source with tsx (run \`npm ci\` in a checkout)\n`);
  process.exit(1);
}

async function registerTsx() {
  try {
    const { register } = await import('tsx/esm/api');
    register();
    return true;
  } catch {
    return false;
  }
}
