// Whether this module is the program being run. From source: its file is argv[1]. In a
// bundle, each bundle is exactly one program, and the build defines __MCPLANE_BUNDLED__.

import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

declare const __MCPLANE_BUNDLED__: boolean | undefined;

export function isEntryPoint(importMetaUrl: string): boolean {
  if (typeof __MCPLANE_BUNDLED__ === 'boolean' && __MCPLANE_BUNDLED__) return true;
  if (!process.argv[1]) return false;
  try {
    return realpathSync(fileURLToPath(importMetaUrl)) === realpathSync(process.argv[1]);
  } catch {
    return false;
  }
}
