// A separate process holding N simulated agents (agents FIRST to FIRST+N-1 of the bench's;
// bench/swarm-group.ts runs several), each with its own node certificate and its own
// TLS connection, speaking the real AgentService protocol. Agent i connects to address i mod the
// number of addresses; when its stream breaks it re-registers on one of the others at random, as
// the real agent does. Driven over stdin/stdout through bench/swarm-group.ts: it prints JSON lines; on "arm"
// it reports when every agent has received a config it did not have before, and it reports each
// re-registration after a broken stream. On "report TAG" every agent sends one status report
// (lastDisruption TAG, so each is a change the server stores) and it says "reported" once all are
// written to their streams. On "retries" it prints how many re-registration
// attempts failed since the start, by address and by the first words of the error.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { ClientDuplexStream } from '@grpc/grpc-js';
import { CLIENT_CHANNEL_OPTIONS } from '../src/runtime/grpc-options.ts';
import { issueCertificate, ROLE_NODE } from '../src/runtime/pki.ts';
import { silenceIpServernameWarning } from '../src/runtime/process-warnings.ts';
import { loadMcplaneProto } from '../src/runtime/proto.ts';
import { clientCredentials } from '../src/runtime/tls.ts';
import type { AgentMessage } from '../src/runtime/generated/mcplane/v1/AgentMessage.ts';
import type { AgentServiceClient } from '../src/runtime/generated/mcplane/v1/AgentService.ts';
import type { ServerMessage__Output } from '../src/runtime/generated/mcplane/v1/ServerMessage.ts';

silenceIpServernameWarning();
const [addressList, pkiDir, countText, firstText = '0'] = process.argv.slice(2);
const addresses = addressList!.split(',');
const count = Number(countText);
/** The index of this process's first agent among all the bench's (bench/swarm-group.ts). */
const first = Number(firstText);
const ca = { certPem: readFileSync(join(pkiDir!, 'ca.crt'), 'utf8'), keyPem: readFileSync(join(pkiDir!, 'ca.key'), 'utf8') };
const { grpc } = loadMcplaneProto();
const say = (o: object): void => { process.stdout.write(JSON.stringify(o) + '\n'); };

interface Agent {
  name: string;
  zone: string;
  config: string;
  armedFrom: string | undefined;
  done: boolean;
  address: number;
  clients: Map<number, AgentServiceClient>;
  creds: ReturnType<typeof clientCredentials>;
  stream?: ClientDuplexStream<AgentMessage, ServerMessage__Output>;
}
/**
 * Each agent's channels with a subchannel pool of their own. In grpc-js's global pool every new
 * channel looks for a subchannel to share by comparing its options with every other's: with
 * 5,000 channels in one process that scan took this process's whole CPU for ten seconds after a
 * kill, and the bench timed the swarm, not the replicas. A real agent is a process with one
 * channel per server, so nothing is lost by it.
 */
const SWARM_CHANNEL_OPTIONS = { ...CLIENT_CHANNEL_OPTIONS, 'grpc.use_local_subchannel_pool': 1 };
const agents: Agent[] = [];
let armed = false;
let remaining = 0;
let reconnected = 0;
/** Failed re-registration attempts: "address: reason" -> count. */
const failedAttempts = new Map<string, number>();

function open(agent: Agent, isReconnect: boolean): Promise<void> {
  let client = agent.clients.get(agent.address);
  if (!client) {
    client = new grpc.mcplane.v1.AgentService(addresses[agent.address]!, agent.creds, SWARM_CHANNEL_OPTIONS);
    agent.clients.set(agent.address, client);
  }
  const stream = client.connect();
  agent.stream = stream;
  return new Promise<void>((resolve, reject) => {
    let registered = false;
    stream.on('data', (m: ServerMessage__Output) => {
      if (m.registered) {
        registered = true;
        if (isReconnect) say({ event: 'reconnected', count: ++reconnected, at: Date.now() });
        resolve();
      }
      if (!m.assignment) return;
      const config = m.assignment.renderedConfig;
      agent.config = config;
      stream.write({ status: { status: { currentConfig: config, desiredConfig: config, state: 'Done', phase: 'done' } } });
      if (armed && !agent.done && config !== agent.armedFrom) {
        agent.done = true;
        if (--remaining === 0) say({ event: 'fanout-done', at: Date.now() });
      }
    });
    const broken = (err?: Error): void => {
      if (agent.stream !== stream) return;
      agent.stream = undefined;
      if (!registered) reject(err ?? new Error('stream ended before registration'));
      // Like the agent (src/agent/session.ts): a registered stream lost moves to one of the other
      // addresses at random, after a short jittered pause.
      const others = addresses.flatMap((_, i) => (i === agent.address ? [] : [i]));
      agent.address = registered && others.length > 1 ? others[Math.floor(Math.random() * others.length)]! : (agent.address + 1) % addresses.length;
      setTimeout(() => void reopen(agent), 50 + Math.random() * 200);
    };
    stream.on('error', broken);
    stream.on('end', () => broken());
    stream.write({ register: { nodeName: agent.name, labels: { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': agent.zone }, bootId: 'b', agentVersion: 'bench', status: { state: 'Done', currentConfig: agent.config, desiredConfig: agent.config } } });
  });
}

async function reopen(agent: Agent): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await open(agent, true);
      return;
    } catch (err) {
      const reason = `${addresses[agent.address]}: ${String((err as Error)?.message ?? err).replace(/\d+/g, 'N').slice(0, 90)}`;
      failedAttempts.set(reason, (failedAttempts.get(reason) ?? 0) + 1);
      agent.address = (agent.address + 1) % addresses.length;
      await new Promise((r) => setTimeout(r, Math.min(1000, 100 * (attempt + 1))));
    }
  }
}

async function start(i: number): Promise<void> {
  const name = `bench-${String(i).padStart(5, '0')}`;
  const pair = await issueCertificate(ca, { commonName: name, organization: ROLE_NODE, usage: 'client' });
  const creds = clientCredentials({ ca: Buffer.from(ca.certPem), cert: Buffer.from(pair.certPem), key: Buffer.from(pair.keyPem) });
  const agent: Agent = { name, zone: `zone-${i % 3}`, config: '', armedFrom: undefined, done: false, address: i % addresses.length, clients: new Map(), creds };
  agents.push(agent);
  await open(agent, false);
}

const CONCURRENCY = 64;
let next = 0;
await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
  while (next < count) await start(first + next++);
}));
say({ event: 'connected', count: agents.length, perAddress: addresses.map((_, i) => agents.filter((a) => a.address === i).length) });

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'arm') {
    for (const a of agents) {
      a.armedFrom = a.config;
      a.done = false;
    }
    remaining = agents.length;
    armed = true;
    say({ event: 'armed' });
  }
  if (line.startsWith('report ')) {
    const tag = line.slice('report '.length);
    let pending = agents.length;
    const written = (): void => {
      if (--pending === 0) say({ event: 'reported' });
    };
    for (const a of agents) {
      if (!a.stream) written();
      else a.stream.write({ status: { status: { currentConfig: a.config, desiredConfig: a.config, state: 'Done', phase: 'done', lastDisruption: tag } } }, written);
    }
  }
  if (line === 'retries') say({ event: 'retries', failed: Object.fromEntries([...failedAttempts].sort((a, b) => b[1] - a[1])) });
  if (line === 'exit') process.exit(0);
});
