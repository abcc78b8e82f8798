// A separate process holding N simulated agents, each with its own node certificate and its own
// TLS connection, speaking the real AgentService protocol. Driven over stdin/stdout by
// bench/controlplane.ts: it prints JSON lines, and on "arm" it reports when every agent has
// received a config it did not have before.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CLIENT_CHANNEL_OPTIONS } from '../src/runtime/grpc-options.ts';
import { issueCertificate, ROLE_NODE } from '../src/runtime/pki.ts';
import { silenceIpServernameWarning } from '../src/runtime/process-warnings.ts';
import { loadMcplaneProto } from '../src/runtime/proto.ts';
import { clientCredentials } from '../src/runtime/tls.ts';
import type { ServerMessage__Output } from '../src/runtime/generated/mcplane/v1/ServerMessage.ts';

silenceIpServernameWarning();
const [address, pkiDir, countText] = process.argv.slice(2);
const count = Number(countText);
const ca = { certPem: readFileSync(join(pkiDir!, 'ca.crt'), 'utf8'), keyPem: readFileSync(join(pkiDir!, 'ca.key'), 'utf8') };
const { grpc } = loadMcplaneProto();
const say = (o: object): void => { process.stdout.write(JSON.stringify(o) + '\n'); };

interface Agent { name: string; config: string; armedFrom: string | undefined; done: boolean }
const agents: Agent[] = [];
let armed = false;
let remaining = 0;

async function start(i: number): Promise<void> {
  const name = `bench-${String(i).padStart(5, '0')}`;
  const pair = await issueCertificate(ca, { commonName: name, organization: ROLE_NODE, usage: 'client' });
  const creds = clientCredentials({ ca: Buffer.from(ca.certPem), cert: Buffer.from(pair.certPem), key: Buffer.from(pair.keyPem) });
  const client = new grpc.mcplane.v1.AgentService(address!, creds, CLIENT_CHANNEL_OPTIONS);
  const stream = client.connect();
  const agent: Agent = { name, config: '', armedFrom: undefined, done: false };
  agents.push(agent);
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (m: ServerMessage__Output) => {
      if (m.registered) resolve();
      if (!m.assignment) return;
      const config = m.assignment.renderedConfig;
      agent.config = config;
      stream.write({ status: { status: { currentConfig: config, desiredConfig: config, state: 'Done', phase: 'done' } } });
      if (armed && !agent.done && config !== agent.armedFrom) {
        agent.done = true;
        if (--remaining === 0) say({ event: 'fanout-done', at: Date.now() });
      }
    });
    stream.on('error', (err: Error) => reject(err));
    stream.write({ register: { nodeName: name, labels: { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': `zone-${i % 3}` }, bootId: 'b', agentVersion: 'bench', status: { state: 'Done' } } });
  });
}

const CONCURRENCY = 64;
let next = 0;
await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
  while (next < count) await start(next++);
}));
say({ event: 'connected', count: agents.length });

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'arm') {
    for (const a of agents) a.armedFrom = a.config;
    remaining = agents.length;
    armed = true;
    say({ event: 'armed' });
  }
  if (line === 'exit') process.exit(0);
});
