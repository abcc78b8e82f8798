// mcctl version: this client's version and, over GetServerInfo, the server's. The client's is
// printed even when the server cannot be reached, and then the exit is 1.

import { McplaneError } from '../../machineconfig/index.ts';
import { VERSION } from '../../runtime/version.ts';
import { call } from '../client/call.ts';
import type { Clients } from '../client/connection.ts';
import { forDisplay } from '../format.ts';
import { formatOne } from '../output.ts';
import type { Io } from './read.ts';

export async function versionCommand(connect: () => Clients, io: Io, output: string | undefined): Promise<void> {
  let server: { version: string; replica: string; store: string; leader: boolean; address: string } | undefined;
  let failure: McplaneError | undefined;
  let c: Clients | undefined;
  try {
    c = connect();
    const info = await call(c, c.status.getServerInfo.bind(c.status), {}, 'get the server version');
    // The address that answered: --status-server when given, where GetServerInfo went.
    server = { ...info, address: c.statusServer };
    if (output !== 'json' && output !== 'yaml') server = forDisplay(server);
  } catch (err) {
    if (!(err instanceof McplaneError)) throw err;
    failure = err;
  } finally {
    c?.close();
  }
  if (output === 'json' || output === 'yaml') {
    io.out(formatOne({ clientVersion: VERSION, serverVersion: server ?? null, ...(failure ? { serverError: failure.message } : {}) }, { kind: output }));
  } else {
    io.out(`client: ${VERSION}\n`);
    // The server's words for itself, shown with their control characters escaped (format.ts).
    // Why it is unreachable is said once, by the error on stderr.
    io.out(server
      ? `server: ${server.version} (at ${server.address}, replica ${server.replica}${server.leader ? ', leader' : ''}, store ${server.store})\n`
      : 'server: unreachable\n');
  }
  if (failure) throw failure;
}
