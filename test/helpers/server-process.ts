// mcplane-server as a separate process (the real entry point), for kill -9 and signal tests.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { connect, type Clients } from '../../src/cli/client/connection.ts';
import { programArgs, REPO_ROOT } from './run-cli.ts';
import { testPki, type TestPki } from './test-pki.ts';
import { scaled } from './time-scale.ts';

export interface ServerProcess {
  child: ChildProcess;
  address: string;
  /** The --status-listen address it bound, when given one. */
  statusAddress?: string;
  logs: string[];
  exited: Promise<number | null>;
}

export async function spawnServer(args: string[]): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...programArgs('mcplane-server'), ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr!.on('data', (d) => { stderr += d; });
  let statusAddress: string | undefined;
  const address = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start within ${scaled(20_000)} ms: ${stderr}\n${logs.join('')}`)), scaled(20_000));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      logs.push(line);
      const m = /"grpc":"([^"]+)".*mcplane-server ready/.exec(line);
      if (m) {
        statusAddress = /"status":"([^"]+)"/.exec(line)?.[1];
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    void exited.then((code) => reject(new Error(`server exited with ${code}: ${stderr}`)));
  });
  return { child, address, ...(statusAddress ? { statusAddress } : {}), logs, exited };
}

/**
 * A fresh data directory and test PKI for mcplane-server processes; each `start()` spawns one on
 * that same SQLite file, with an admin client of it. Shared by the durability tests, which kill a
 * server with -9 and check what the next one on the same file serves.
 */
export async function freshStore(prefix: string): Promise<{ pki: TestPki; start(): Promise<{ server: ServerProcess; c: Clients }> }> {
  const pki = await testPki();
  const dataDir = mkdtempSync(join(tmpdir(), prefix));
  return {
    pki,
    async start() {
      const server = await spawnServer(['--data-dir', dataDir, '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap']);
      return { server, c: connect({ server: server.address, pkiDir: pki.dir, config: '/dev/null' }) };
    },
  };
}
