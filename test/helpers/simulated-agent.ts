// A stand-in for mcplane-agent that speaks the real AgentService protocol over real gRPC/TLS,
// for tests and benchmarks of the control plane. It applies nothing: on an assignment it can
// report Done at once (autoDone), or wait for the test to report.

import { readFileSync } from 'node:fs';
import type { ClientDuplexStream, ServiceError } from '@grpc/grpc-js';
import { CLIENT_CHANNEL_OPTIONS } from '../../src/runtime/grpc-options.ts';
import { loadMcplaneProto } from '../../src/runtime/proto.ts';
import { clientCredentials } from '../../src/runtime/tls.ts';
import type { AgentMessage } from '../../src/runtime/generated/mcplane/v1/AgentMessage.ts';
import type { AgentServiceClient } from '../../src/runtime/generated/mcplane/v1/AgentService.ts';
import type { Assignment__Output } from '../../src/runtime/generated/mcplane/v1/Assignment.ts';
import type { NodeStatus } from '../../src/runtime/generated/mcplane/v1/NodeStatus.ts';
import type { ServerMessage__Output } from '../../src/runtime/generated/mcplane/v1/ServerMessage.ts';

export interface SimulatedAgentOptions {
  address: string;
  tls: { ca: string; cert: string; key: string };
  name: string;
  labels?: Record<string, string>;
  /** Register as this node instead of `name` (to test impersonation). */
  registerAs?: string;
  autoDone?: boolean;
  currentConfig?: string;
}

/** Increases with every assignment any simulated agent in this process receives. */
let assignmentSequence = 0;

export class SimulatedAgent {
  readonly assignments: (Assignment__Output & { sequence: number })[] = [];
  readonly commands: ServerMessage__Output['command'][] = [];
  pool: string | undefined;
  error: ServiceError | undefined;
  /** The server ended the stream (cleanly or with an error). */
  ended = false;
  status: NodeStatus;
  #client: AgentServiceClient;
  #stream: ClientDuplexStream<AgentMessage, ServerMessage__Output> | undefined;
  #waiters: (() => void)[] = [];

  constructor(readonly options: SimulatedAgentOptions) {
    const { grpc } = loadMcplaneProto();
    const tls = { ca: readFileSync(options.tls.ca), cert: readFileSync(options.tls.cert), key: readFileSync(options.tls.key) };
    this.#client = new grpc.mcplane.v1.AgentService(options.address, clientCredentials(tls), CLIENT_CHANNEL_OPTIONS);
    this.status = { currentConfig: options.currentConfig ?? '', desiredConfig: '', state: 'Done', phase: 'done', reason: '' };
  }

  /** Opens the stream and registers; resolves when the server says which pool, or on error. */
  connect(): Promise<void> {
    const stream = this.#client.connect();
    this.#stream = stream;
    stream.on('data', (m: ServerMessage__Output) => {
      if (m.registered) this.pool = m.registered.pool;
      if (m.assignment) {
        this.assignments.push({ ...m.assignment, sequence: ++assignmentSequence });
        if (this.options.autoDone) this.report({ currentConfig: m.assignment.renderedConfig, desiredConfig: m.assignment.renderedConfig, state: 'Done', phase: 'done' });
      }
      if (m.command) this.commands.push(m.command);
      this.#notify();
    });
    stream.on('error', (err: ServiceError) => {
      this.error = err;
      this.ended = true;
      this.#notify();
    });
    stream.on('end', () => {
      this.ended = true;
      this.#notify();
    });
    stream.write({ register: { nodeName: this.options.registerAs ?? this.options.name, labels: this.options.labels ?? { 'node-role.kubernetes.io/worker': '' }, bootId: 'boot-1', agentVersion: 'simulated', status: this.status } });
    return this.waitFor(() => this.pool !== undefined || this.error !== undefined, 10_000);
  }

  report(status: Partial<NodeStatus>): void {
    this.status = { ...this.status, ...status };
    this.#stream?.write({ status: { status: this.status } });
  }

  get lastAssignment(): Assignment__Output | undefined {
    return this.assignments.at(-1);
  }

  waitFor(predicate: () => boolean, timeoutMs = 10_000): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.options.name}: condition not met within ${timeoutMs} ms`)), timeoutMs);
      const check = (): void => {
        if (predicate()) {
          clearTimeout(timer);
          resolve();
        } else {
          this.#waiters.push(check);
        }
      };
      this.#waiters.push(check);
    });
  }

  close(): void {
    this.#stream?.end();
    this.#stream?.cancel();
    this.#client.close();
  }

  #notify(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }
}

/** Polls until `predicate` holds (for state the test reads from the server). */
export async function eventually(predicate: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
