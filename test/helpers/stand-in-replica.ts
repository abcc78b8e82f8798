// A stand-in for one mcplane-server replica's AgentService, for agent tests that need several
// replicas and to kill one: it accepts every registration (answering pool worker), records what
// agents send, and can write to their streams. It follows the contract of api/agent-service.ts
// only as far as those tests need: the real server is tested against real agents elsewhere.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { loadMcplaneProto } from '../../src/runtime/proto.ts';
import type { AgentMessage__Output } from '../../src/runtime/generated/mcplane/v1/AgentMessage.ts';
import type { ServerMessage } from '../../src/runtime/generated/mcplane/v1/ServerMessage.ts';
import type { TestPki } from './test-pki.ts';

export class StandInReplica {
  readonly received: AgentMessage__Output[] = [];
  readonly streams: ServerDuplexStream<AgentMessage__Output, ServerMessage>[] = [];
  readonly server = new Server();
  port = 0;

  readonly name: string;
  private readonly onRegister?: (call: ServerDuplexStream<AgentMessage__Output, ServerMessage>) => void;
  constructor(name: string, onRegister?: (call: ServerDuplexStream<AgentMessage__Output, ServerMessage>) => void) {
    this.name = name;
    this.onRegister = onRegister;
    const { grpc } = loadMcplaneProto();
    this.server.addService(grpc.mcplane.v1.AgentService.service, {
      connect: (call: ServerDuplexStream<AgentMessage__Output, ServerMessage>) => {
        this.streams.push(call);
        call.on('data', (m: AgentMessage__Output) => {
          this.received.push(m);
          if (m.register) {
            call.write({ registered: { pool: 'worker' } });
            this.onRegister?.(call);
          }
        });
        call.on('error', () => undefined);
        call.on('end', () => call.end());
      },
    });
  }

  async listen(pki: TestPki): Promise<void> {
    const file = (f: string) => readFileSync(join(pki.dir, f));
    const creds = ServerCredentials.createSsl(file('ca.crt'), [{ cert_chain: file('server.crt'), private_key: file('server.key') }], true);
    this.port = await new Promise<number>((resolve, reject) => this.server.bindAsync('127.0.0.1:0', creds, (err, port) => (err ? reject(err) : resolve(port))));
  }

  get registrations() {
    return this.received.filter((m) => m.register).map((m) => m.register!);
  }

  /** Gone at once, streams and all, as a replica whose machine dies. */
  kill(): void {
    this.server.forceShutdown();
  }
}
