// AgentService.Connect: one stream per agent. The first message must register the node the
// client certificate names; after that the stream speaks only for that node.

import type { ServerDuplexStream, ServiceError } from '@grpc/grpc-js';
import { agentVersionProblem, InvalidDocumentError, NODE_NAME_RULE, nodeNameProblem, McplaneError, PermissionDeniedError, RateLimitedError, registrationProblems, type NodeStatus, type StagingStatus } from '../../machineconfig/index.ts';
import type { AgentMessage__Output } from '../../runtime/generated/mcplane/v1/AgentMessage.ts';
import type { AgentServiceHandlers } from '../../runtime/generated/mcplane/v1/AgentService.ts';
import type { NodeStatus__Output } from '../../runtime/generated/mcplane/v1/NodeStatus.ts';
import type { ServerMessage } from '../../runtime/generated/mcplane/v1/ServerMessage.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { AgentStream } from '../sessions/agent-sessions.ts';
import type { AgentEntry } from './api-access.ts';
import type { Authorizer, CertifiedNode } from './authorization.ts';
import { toServiceError } from './status-errors.ts';

export function agentService(agents: AgentEntry, auth: Authorizer, log: Logger): AgentServiceHandlers {
  return {
    Connect(call: ServerDuplexStream<AgentMessage__Output, ServerMessage>) {
      const fail = (err: unknown): void => {
        call.emit('error', toServiceError(err, log) as ServiceError);
      };
      let certified: CertifiedNode | undefined;
      try {
        certified = auth.requireNode(call);
      } catch (err) {
        fail(err);
        return;
      }
      let nodeName: string | undefined;
      let closed = false;
      const stream: AgentStream = {
        // The service is registered accepting PreEncoded responses (grpc-server.ts), which the
        // generated types do not know of.
        write: (message) => !closed && call.write(message as ServerMessage),
        end: (error) => {
          if (!closed) {
            if (error) fail(error);
            else call.end();
          }
          closed = true;
        },
      };
      // Messages are handled one at a time so a status report never overtakes its registration.
      let queue = Promise.resolve();
      call.on('data', (message: AgentMessage__Output) => {
        queue = queue.then(() => handle(message)).catch((err) => {
          fail(err);
          closed = true;
        });
      });
      const handle = async (message: AgentMessage__Output): Promise<void> => {
        if (closed) return;
        if (message.register) {
          const reg = message.register;
          const nameProblem = nodeNameProblem(reg.nodeName);
          if (nameProblem) {
            throw new InvalidDocumentError([{ object: `Node/${reg.nodeName.slice(0, 253) || '<unnamed>'}`, field: 'register.nodeName', rule: NODE_NAME_RULE, message: nameProblem }]);
          }
          if (certified !== undefined && reg.nodeName !== certified.name) {
            log.warn({ certificate: certified.name, claimed: reg.nodeName }, 'node tried to register under another name');
            throw new PermissionDeniedError(`this certificate is for node ${certified.name}; it cannot register as ${reg.nodeName}`);
          }
          if (nodeName && reg.nodeName !== nodeName) {
            throw new PermissionDeniedError(`this stream registered as ${nodeName}; it cannot re-register as ${reg.nodeName}`);
          }
          // Labels and the version end up in every node listing and in operators' terminals;
          // checked here, before anything is stored, as the API server checks a Node's labels.
          const problems = registrationProblems({ nodeName: reg.nodeName, labels: reg.labels, agentVersions: [reg.agentVersion, reg.status?.agentVersion ?? ''] });
          if (problems.length) throw new InvalidDocumentError(problems);
          nodeName = reg.nodeName;
          await agents.registerNode({
            nodeName,
            labels: reg.labels,
            ...(certified ? { boundPool: certified.pool, certificate: certified.certificate, certificateDer: certified.der } : {}),
            bootId: reg.bootId,
            agentVersion: reg.agentVersion,
            status: statusFromWire(reg.status, reg.bootId, reg.agentVersion),
          }, stream);
          // The stream may have ended while the session was being recorded.
          if (closed) await agents.disconnect(nodeName, stream);
          return;
        }
        if (!nodeName) throw new PermissionDeniedError('the first message on an agent stream must be register');
        if (message.renew) {
          // Answered on the stream, which stays open whatever the outcome: a renewal that fails
          // (this replica cannot sign, a conflict) is asked again later, never a lost stream.
          if (!certified) {
            stream.write({ renewalFailed: { code: 'MCPLANE_PRECONDITION_FAILED', message: 'this server runs without TLS: there is no certificate to renew', retryAfterSeconds: 0 } });
            return;
          }
          const node = nodeName;
          void agents.renewCertificate(node, stream, certified.certificate, certified.pool, message.renew.csrPem).then(
            (issued) => { stream.write({ certificate: { certificatePem: issued.certificatePem, caBundlePem: issued.caBundlePem } }); },
            (err: unknown) => {
              const e = err instanceof McplaneError ? err : undefined;
              if (!e) log.warn({ err, node }, 'renewing a node certificate failed');
              stream.write({ renewalFailed: { code: e?.code ?? 'MCPLANE_ERROR', message: (err as Error).message, retryAfterSeconds: err instanceof RateLimitedError ? Math.ceil(err.retryAfterSeconds) : 0 } });
            },
          );
          return;
        }
        // Heartbeats need no answer: the stream being open is what keeps the session.
        if (message.status?.status) {
          const version = agentVersionProblem(message.status.status.agentVersion);
          if (version) throw new InvalidDocumentError([{ object: `Node/${nodeName}`, field: 'status.agentVersion', rule: 'agent-version', message: version }]);
          agents.reportStatus(nodeName, statusFromWire(message.status.status));
        }
      };
      const gone = (): void => {
        closed = true;
        if (nodeName) void agents.disconnect(nodeName, stream).catch((err: unknown) => log.warn({ err, node: nodeName }, 'ending the node\'s session failed'));
      };
      call.on('end', () => {
        gone();
        call.end();
      });
      call.on('cancelled', gone);
      call.on('error', gone);
      call.on('close', gone);
    },
  };
}

/**
 * The report as the protocol's defaults fill it in; admitted (bounded, its state checked) by the
 * agent entry, the one place every report passes.
 */
function statusFromWire(s: NodeStatus__Output | null, bootId = '', agentVersion = ''): NodeStatus {
  return {
    currentConfig: s?.currentConfig ?? '',
    desiredConfig: s?.desiredConfig ?? '',
    state: (s?.state || 'Done') as NodeStatus['state'],
    phase: s?.phase ?? '',
    reason: s?.reason ?? '',
    drift: (s?.drift ?? []).map((d) => ({ ...d, kind: d.kind === 'unit' ? 'unit' : 'file' })),
    os: s?.os ?? null,
    bootId: s?.bootId || bootId,
    agentVersion: s?.agentVersion || agentVersion,
    lastDisruption: s?.lastDisruption ?? '',
    // Checked field by field (types, lengths) on admission, like the rest.
    currentUpdate: (s?.currentUpdate ?? null) as NodeStatus['currentUpdate'],
    lastUpdate: (s?.lastUpdate ?? null) as NodeStatus['lastUpdate'],
    // Fields 15-16 (staging, PinnedImageSets): checked and bounded on admission like the rest.
    staging: s?.staging ? { ...s.staging, state: s.staging.state as NonNullable<NodeStatus['staging']>['state'] } : null,
    pinnedImageSets: s?.pinnedImageSets ?? [],
    // Bounded and checked on admission, like the drift entries' content.
    driftPolicy: (s?.driftPolicy ?? '') as NodeStatus['driftPolicy'],
    drifted: (s?.drifted ?? null) as NodeStatus['drifted'],
    agentFeatures: s?.agentFeatures ?? [],
  };
}
