// driftPolicy Adopt: the node's version of each drifted file, read for the report the control
// plane turns into a proposed MachineConfig. Read without following a link (a link planted at a
// managed path must not make the agent report the file it points to), bounded as the report is
// (drift-adoption.ts), and never for a file others may not read: its content would travel to
// the control plane and into a MachineConfig anyone with read access sees; such a file is
// adopted by hand, and the entry says so.

import { constants, fstatSync, openSync, readSync, closeSync } from 'node:fs';
import { boundAdoptedContent, MAX_ADOPTED_FILE_BYTES, type Drift } from '../machineconfig/index.ts';

/** `found` with each drifted file's content, mode and owner as on the node (host paths by `hostPathOf`). */
export function withNodeContent(found: readonly Drift[], hostPathOf: (d: Drift) => string | undefined): Drift[] {
  return boundAdoptedContent(found.map((d) => {
    if (d.kind !== 'file' || !d.path.startsWith('/')) return { ...d, contentOmitted: 'a unit\'s state is not a file to adopt: change the config' };
    const hostPath = hostPathOf(d);
    if (!hostPath) return { ...d, contentOmitted: 'not a file the config manages' };
    return { ...d, ...readForAdoption(hostPath) };
  }));
}

function readForAdoption(hostPath: string): Pick<Drift, 'contentBase64' | 'mode' | 'user' | 'group' | 'contentOmitted'> {
  let fd: number;
  try {
    fd = openSync(hostPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { contentOmitted: 'missing on the node: a removal cannot be adopted, remove the file from the config instead' };
    if (code === 'ELOOP') return { contentOmitted: 'a symbolic link on the node: not adopted (a config writes files, not links, at this path)' };
    return { contentOmitted: `cannot be read on the node: ${code ?? (err as Error).message}` };
  }
  try {
    const st = fstatSync(fd);
    const owner = { mode: `0${(st.mode & 0o7777).toString(8)}`, user: String(st.uid), group: String(st.gid) };
    if (!st.isFile()) return { ...owner, contentOmitted: 'not a regular file on the node' };
    if ((st.mode & 0o004) === 0) return { ...owner, contentOmitted: `content withheld: file mode ${owner.mode} on the node, others may not read it; adopt it by hand` };
    if (st.size > MAX_ADOPTED_FILE_BYTES) return { ...owner, contentOmitted: `content not reported: the file has ${st.size} bytes, more than the ${MAX_ADOPTED_FILE_BYTES} a report carries; adopt it by hand` };
    // One byte past the bound: a file that grew since fstat is caught, not cut silently.
    const buf = Buffer.alloc(MAX_ADOPTED_FILE_BYTES + 1);
    let n = 0;
    for (let r; n < buf.length && (r = readSync(fd, buf, n, buf.length - n, n)) > 0;) n += r;
    if (n > MAX_ADOPTED_FILE_BYTES) return { ...owner, contentOmitted: `content not reported: the file has more than the ${MAX_ADOPTED_FILE_BYTES} bytes a report carries; adopt it by hand` };
    return { ...owner, contentBase64: buf.subarray(0, n).toString('base64') };
  } finally {
    closeSync(fd);
  }
}
