// driftPolicy Adopt: the node keeps its version of a drifted file, its agent reports that
// version, and the control plane turns it into a proposed MachineConfig (mcctl drift adopt).
// The bounds are shared: the agent reads no more than this, and the control plane's admission of
// a report cuts whatever an agent (buggy or hostile) sends past them, each cut saying so where it
// happened. A report is stored and kept in every replica's cache, so the bounds are small: hand
// edits are to config files, and a file past them is adopted by hand.

import type { Drift } from './types.ts';

/** The largest file whose content is reported (a chrony.conf or sshd_config is a few KiB). */
export const MAX_ADOPTED_FILE_BYTES = 32 * 1024;
/** Drifted files whose content one report carries. */
export const MAX_ADOPTED_FILES = 8;
/** All reported content of one node together. */
export const MAX_ADOPTED_TOTAL_BYTES = 64 * 1024;

/**
 * The drift entries with their content within the bounds: content past one is dropped and the
 * entry says why, in order, so the first files of a report keep theirs. Entries without content
 * keep any reason they came with. Used by the agent before it reports and by the control plane
 * on admission.
 */
export function boundAdoptedContent(drift: readonly Drift[]): Drift[] {
  let files = 0;
  let total = 0;
  return drift.map((d) => {
    if (!d.contentBase64) return d;
    const bytes = base64Bytes(d.contentBase64);
    const omit = (why: string): Drift => {
      const { contentBase64: _dropped, ...rest } = d;
      return { ...rest, contentOmitted: why };
    };
    if (bytes === undefined) return omit('the content reported was not base64');
    if (bytes > MAX_ADOPTED_FILE_BYTES) return omit(`content not reported: the file has ${bytes} bytes, more than the ${MAX_ADOPTED_FILE_BYTES} a report carries; adopt it by hand`);
    if (files >= MAX_ADOPTED_FILES) return omit(`content not reported: more than ${MAX_ADOPTED_FILES} drifted files (the first ${MAX_ADOPTED_FILES} carry theirs); adopt these, then the rest, or by hand`);
    if (total + bytes > MAX_ADOPTED_TOTAL_BYTES) return omit(`content not reported: the drifted files together pass the ${MAX_ADOPTED_TOTAL_BYTES} bytes a report carries; adopt the others first, or this one by hand`);
    files++;
    total += bytes;
    return d;
  });
}

/** The decoded length of strict base64, or undefined when it is not base64. */
function base64Bytes(text: string): number | undefined {
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return undefined;
  return (text.length / 4) * 3 - (text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0);
}

export interface DriftProposalInput {
  node: string;
  pool: string;
  /** The labels that make the pool select a MachineConfig (its machineConfigSelector.matchLabels). */
  poolLabels: Record<string, string>;
  drift: readonly Drift[];
}

export interface DriftProposalResult {
  /** The MachineConfig to review and apply, or undefined when nothing reported can be adopted. */
  manifest: Record<string, unknown> | undefined;
  /** Drifted paths left out, each with why. */
  leftOut: string[];
}

const OCTAL_MODE = /^0?[0-7]{1,4}$/;
const NUMERIC_ID = /^\d{1,10}$/;

/**
 * The node's version of its drifted files as a MachineConfig for its pool: named to merge last
 * (99-), so the node's version wins over the config it drifted from, with each file's mode and
 * numeric owner as on the node and its content as a data: URL.
 */
export function driftProposal(input: DriftProposalInput): DriftProposalResult {
  const files: Record<string, unknown>[] = [];
  const leftOut: string[] = [];
  for (const d of input.drift) {
    if (d.kind !== 'file' || !d.path.startsWith('/')) {
      leftOut.push(`${d.kind} ${d.path}: ${d.kind === 'unit' && !d.path.startsWith('/') ? 'a unit\'s state (enabled, masked) is not a file to adopt: change the config' : 'not a drifted file'}`);
      continue;
    }
    if (d.contentBase64 === undefined) {
      leftOut.push(`${d.kind} ${d.path}: ${d.contentOmitted || (d.actualHash === '' ? 'missing on the node: a removal cannot be adopted, remove it from the config instead' : 'no content reported')}`);
      continue;
    }
    const file: Record<string, unknown> = { path: d.path, overwrite: true, contents: { source: `data:;base64,${d.contentBase64}` } };
    if (d.mode && OCTAL_MODE.test(d.mode)) file.mode = parseInt(d.mode, 8);
    if (d.user && NUMERIC_ID.test(d.user)) file.user = { id: Number(d.user) };
    if (d.group && NUMERIC_ID.test(d.group)) file.group = { id: Number(d.group) };
    files.push(file);
  }
  if (files.length === 0) return { manifest: undefined, leftOut };
  return {
    manifest: {
      apiVersion: 'machineconfiguration.openshift.io/v1',
      kind: 'MachineConfig',
      metadata: {
        name: proposalName(input.pool, input.node),
        labels: { ...input.poolLabels },
        annotations: { 'mcplane.io/adopted-from-node': input.node },
      },
      spec: { config: { ignition: { version: '3.4.0' }, storage: { files } } },
    },
    leftOut,
  };
}

/** "99-<pool>-adopted-<node>", within a name's 253 characters (a node name may be long). */
export function proposalName(pool: string, node: string): string {
  return `99-${pool}-adopted-${node}`.slice(0, 253).replace(/[-.]+$/, '');
}

/** The Drifted condition a node under Adopt reports while its files differ from the config. */
export function driftedConditionMessage(drift: readonly Drift[], node: string): string {
  const paths = drift.map((d) => d.path);
  const shown = paths.slice(0, 5).join(', ') + (paths.length > 5 ? ` and ${paths.length - 5} more` : '');
  return `${paths.length} managed object${paths.length === 1 ? '' : 's'} differ from the config and are kept as the node has them (driftPolicy Adopt): ${shown}; review the proposal with mcctl drift adopt ${node} -o yaml`;
}
