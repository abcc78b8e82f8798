// A status reader in a process of its own, for tests that block the server's thread: it
// connects and reads once (the connection is up before the test blocks anything), prints
// "ready", then on "go" from stdin reads COUNT times and prints one JSON line of the Unix ms at
// which each read was answered.
//   node --import tsx test/helpers/status-reader-process.ts ADDRESS PKI_DIR COUNT

import { createInterface } from 'node:readline';
import { call } from '../../src/cli/client/call.ts';
import { connect } from '../../src/cli/client/connection.ts';
import { silenceIpServernameWarning } from '../../src/runtime/process-warnings.ts';

silenceIpServernameWarning();
const [address, pkiDir, count] = process.argv.slice(2) as [string, string, string];
const c = connect({ server: address, pkiDir, config: '/dev/null', timeout: '30' });
const read = () => call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');

await read();
process.stdout.write('ready\n');
createInterface({ input: process.stdin }).once('line', () => {
  void (async () => {
    const answeredAt: number[] = [];
    for (let i = 0; i < Number(count); i++) {
      await read();
      answeredAt.push(Date.now());
    }
    process.stdout.write(`${JSON.stringify(answeredAt)}\n`);
    c.close();
    process.exit(0);
  })();
});
