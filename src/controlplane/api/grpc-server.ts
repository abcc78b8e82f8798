// The gRPC server: mcplane's four services plus grpc.health.v1 and server reflection, so
// grpcurl, grpc_health_probe and load balancers work without knowing mcplane.

import { Server, type ServerCredentials } from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { SERVER_CHANNEL_OPTIONS } from '../../runtime/grpc-options.ts';
import type { Logger } from '../../runtime/logger.ts';
import { loadMcplaneProto } from '../../runtime/proto.ts';
import type { ApiAccess } from './api-access.ts';
import { agentService } from './agent-service.ts';
import { createAuthorizer } from './authorization.ts';
import { configService } from './config-service.ts';
import { identityService } from './identity-service.ts';
import { statusService } from './status-service.ts';
import { acceptingPreEncoded } from '../../runtime/pre-encoded.ts';
import { CONFIG_RULES, IDENTITY_RULES, STATUS_RULES } from './access-rules.ts';
import { guarded } from './guarded-service.ts';

export const SERVICE_NAMES = ['mcplane.v1.AgentService', 'mcplane.v1.StatusService', 'mcplane.v1.ConfigService', 'mcplane.v1.IdentityService'];

export interface GrpcServerHandle {
  server: Server;
  health: HealthImplementation;
  port: number;
  /** Adds mcplane's services, each backed by the parts of this replica it uses. */
  serve(access: ApiAccess, tls: boolean): void;
}

/** Finishes in-flight calls and refuses new ones; what is still open after `graceMs` is cut. */
export function shutdownGracefully(server: Server, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const force = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(force);
      resolve();
    });
  });
}

/** A gRPC server bound to its port, with health (NOT_SERVING for `services` at first) and reflection. */
export async function bindGrpcServer(address: string, creds: ServerCredentials, services: readonly string[]): Promise<{ server: Server; health: HealthImplementation; port: number }> {
  const { definition } = loadMcplaneProto();
  const server = new Server(SERVER_CHANNEL_OPTIONS);
  const health = new HealthImplementation(Object.fromEntries(['', ...services].map((s) => [s, 'NOT_SERVING'])));
  health.addToServer(server);
  new ReflectionService(definition).addToServer(server);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(address, creds, (err, boundPort) => (err ? reject(err) : resolve(boundPort)));
  });
  return { server, health, port };
}

/**
 * Binds the port with health and reflection only (health says NOT_SERVING until `serve`), so a
 * replica knows the address it advertises before it joins the others.
 */
export async function startGrpcServer(address: string, creds: ServerCredentials, log: Logger): Promise<GrpcServerHandle> {
  const { grpc } = loadMcplaneProto();
  const { server, health, port } = await bindGrpcServer(address, creds, SERVICE_NAMES);
  return {
    server,
    health,
    port,
    serve({ reads, replica, agents, config, identity, audit }, tls) {
      const auth = createAuthorizer(tls);
      // The operator-facing services answer each call only after its RPC's rule allows it, and
      // record every write (access-rules.ts, guarded-service.ts). The agent's is node-only.
      const guard = { auth, cache: reads.cache, audit, log };
      // Assignments are encoded once per fan-out and written to every stream as they are.
      server.addService(acceptingPreEncoded(grpc.mcplane.v1.AgentService.service), agentService(agents, auth, log));
      server.addService(acceptingPreEncoded(grpc.mcplane.v1.StatusService.service), guarded('StatusService', statusService(reads, replica, log), STATUS_RULES, guard));
      server.addService(grpc.mcplane.v1.ConfigService.service, guarded('ConfigService', configService(reads, config, auth, log), CONFIG_RULES, guard));
      server.addService(grpc.mcplane.v1.IdentityService.service, guarded('IdentityService', identityService(reads, identity, audit, auth, log), IDENTITY_RULES, guard));
      for (const s of ['', ...SERVICE_NAMES]) health.setStatus(s, 'SERVING');
    },
  };
}
