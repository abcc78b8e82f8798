// `mcctl drift adopt NODE`: a node's version of its drifted files (driftPolicy Adopt) as a
// MachineConfig for its pool, printed for review and `mcctl apply -f`. Only the manifest goes to
// stdout, so `> mc.yaml` is ready to apply; what it leaves out (units, missing files, content
// withheld or past the report's bounds) goes to stderr.

import { escapeControlCharacters } from '../../machineconfig/control-characters.ts';
import { PreconditionFailedError } from '../../machineconfig/index.ts';
import { call } from '../client/call.ts';
import type { Clients } from '../client/connection.ts';
import { formatObject, type OutputFormat } from '../output.ts';

export async function driftAdoptCommand(c: Clients, node: string, output: OutputFormat, warn: (text: string) => void): Promise<string> {
  const proposal = await call(c, c.status.getDriftProposal.bind(c.status), { node }, `get the drift proposal of node ${node}`);
  for (const line of proposal.leftOut) warn(`warning: not in the proposal: ${escapeControlCharacters(line)}\n`);
  if (!proposal.manifestJson) {
    throw new PreconditionFailedError(`node ${node} reports no drifted file whose content can be adopted${proposal.leftOut.length ? ' (see the warnings above)' : ''}`);
  }
  return formatObject(JSON.parse(proposal.manifestJson), output);
}
