// npm run cluster: the distributed control plane on this machine, to try what a fleet runs:
// a three-member etcd (Debian's etcd-server) and three mcplane-server replicas on it, each on
// its own loopback port, with a fresh PKI. It prints how to point mcctl and agents at them,
// then runs until Ctrl-C, which stops every process and removes every directory it made.

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pkiInitCommand } from '../src/cli/commands/pki.ts';
import { ETCD_BINARY, freePort, startEtcdCluster, type EtcdCluster } from '../sandbox/etcd-cluster.ts';

const ROOT = join(import.meta.dirname, '..');
const REPLICAS = 3;

interface Replica {
  name: string;
  address: string;
  child?: ChildProcess;
}

if (!existsSync(ETCD_BINARY)) {
  console.error(`npm run cluster needs etcd (${ETCD_BINARY}): apt-get install etcd-server`);
  process.exit(2);
}

const dir = mkdtempSync(join(tmpdir(), 'mcplane-cluster-'));
const pkiDir = join(dir, 'pki');
const logDir = join(dir, 'logs');
mkdirSync(logDir);
let etcd: EtcdCluster | undefined;
const replicas: Replica[] = [];
let stopping = false;

async function stop(code: number): Promise<never> {
  if (stopping) process.exit(code);
  stopping = true;
  console.log('\nstopping the replicas and etcd, removing', dir);
  await Promise.all(replicas.map((r) => new Promise<void>((resolve) => {
    if (!r.child || r.child.exitCode !== null || r.child.signalCode !== null) return resolve();
    r.child.once('exit', () => resolve());
    r.child.kill('SIGTERM');
    setTimeout(() => r.child?.kill('SIGKILL'), 3000).unref();
  })));
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
  process.exit(code);
}
process.on('SIGINT', () => void stop(0));
process.on('SIGTERM', () => void stop(0));

function startReplica(r: Replica, endpoints: string[]): Promise<void> {
  const log = createWriteStream(join(logDir, `${r.name}.log`), { flags: 'a' });
  const child = spawn(process.execPath, [
    '--import', 'tsx', join(ROOT, 'src/controlplane/main.ts'),
    '--store', `etcd://${endpoints.join(',')}`, '--replica-name', r.name, '--listen', r.address,
    '--pki-dir', pkiDir, '--no-bootstrap',
  ], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, MCPLANE_LOG_FORMAT: 'json' } });
  r.child = child;
  child.stderr!.pipe(log);
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      log.write(line + '\n');
      if (line.includes('mcplane-server ready')) resolve();
      if (line.includes('elected leader')) console.log(`  ${new Date().toISOString().slice(11, 19)}  ${r.name} is the leader now`);
    });
    child.once('exit', (code, signal) => {
      if (!stopping) console.log(`  ${r.name} exited (${signal ?? code}); its log: ${join(logDir, `${r.name}.log`)}`);
      reject(new Error(`${r.name} exited before it was ready`));
    });
  });
}

try {
  await pkiInitCommand(pkiDir, [], []);
  console.log('starting a three-member etcd...');
  etcd = await startEtcdCluster({ members: 3, electionMs: 1000, heartbeatMs: 100 });
  for (let i = 0; i < REPLICAS; i++) replicas.push({ name: `replica-${i}`, address: `127.0.0.1:${await freePort()}` });
  console.log('starting three mcplane-server replicas...');
  for (const r of replicas) await startReplica(r, etcd.endpoints);
} catch (err) {
  console.error(`npm run cluster: ${(err as Error).message}`);
  await stop(1);
}

const addresses = replicas.map((r) => r.address).join(',');
console.log(`
The distributed control plane is running:
  etcd members   ${etcd!.endpoints.join(' ')}
  replicas       ${replicas.map((r) => `${r.name}=${r.address} (pid ${r.child!.pid})`).join(' ')}
  logs           ${logDir}

Try, in another terminal:
  npm run mcctl -- --pki-dir ${pkiDir} -s ${replicas[0]!.address} get replicas
  npm run mcctl -- --pki-dir ${pkiDir} -s ${replicas[1]!.address} apply -f examples/
  npm run mcctl -- --pki-dir ${pkiDir} -s ${replicas[2]!.address} get mcp
An agent lists every replica (agent.yaml: servers: [${addresses}]) and moves to another when
one is lost. Kill the leader (kill -9 the pid of the replica that get replicas marks LEADER) and
watch another take over within about 5 s. Ctrl-C stops everything and removes ${dir}.
`);

await new Promise(() => {});
