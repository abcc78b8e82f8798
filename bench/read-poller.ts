// One status reader in a process of its own, as an operator's mcctl is: bench/controlplane.ts
// starts one per kind of read and replica. Reading in the bench's own process measured the bench:
// decoding one ListNodes answer of 1,000 nodes held its event loop, and every other read in
// flight there was timed as if the server had been that slow.
//   node --import tsx bench/read-poller.ts ADDRESS PKI_DIR all|page|pool
// stdin "go": call in a loop, at most one call every PACE_MS; "stop": print the latencies (ms)
// as one JSON line and exit.

import { createInterface } from 'node:readline';
import { connect } from '../src/cli/client/connection.ts';
import { silenceIpServernameWarning } from '../src/runtime/process-warnings.ts';
import { timedRead, type StatusRead } from './status-reads.ts';

silenceIpServernameWarning();
const [address, pkiDir, kind] = process.argv.slice(2) as [string, string, StatusRead];
const c = connect({ server: address, pkiDir, config: '/dev/null', timeout: '60' });

const PACE_MS = 100;

const once = (): Promise<number> => timedRead(c, kind);

await once(); // connected (and the first call's set-up paid) before the measured ones
process.stdout.write('ready\n');
const samples: number[] = [];
let running = false;
let loop: Promise<void> = Promise.resolve();
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'go' && !running) {
    running = true;
    loop = (async () => {
      while (running) {
        const ms = await once();
        samples.push(ms);
        // Paced as a watching operator or a dashboard is: back-to-back reads of 5,000 nodes
        // would themselves take a core from the fan-out being measured.
        if (ms < PACE_MS) await new Promise((r) => setTimeout(r, PACE_MS - ms));
      }
    })();
  }
  if (line === 'stop') {
    running = false;
    // The call in flight when the fan-out ended overlapped it: it counts too.
    void loop.then(() => {
      process.stdout.write(JSON.stringify(samples) + '\n');
      c.close();
      process.exit(0);
    });
  }
});
