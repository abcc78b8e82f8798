// McplaneError codes to gRPC status codes, in one table. Problems travel in the
// `mcplane-problems-bin` trailer (JSON) so clients can print them without parsing messages: the
// first ones that fit a budget (see problem-budget.ts), with the total in `mcplane-problems-total`.

import { Metadata, status as Status, type ServiceError } from '@grpc/grpc-js';
import { boundDetails, boundProblems, InvalidDocumentError, McplaneError, RenderError, type McplaneErrorCode } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';

/** Typed by every code there is, so the compiler refuses a new error class without a status. */
const STATUS_BY_CODE: Record<McplaneErrorCode, Status> = {
  MCPLANE_INVALID_DOCUMENT: Status.INVALID_ARGUMENT,
  MCPLANE_RENDER_FAILED: Status.FAILED_PRECONDITION,
  MCPLANE_POOL_CONFLICT: Status.FAILED_PRECONDITION,
  MCPLANE_UNKNOWN_POOL: Status.NOT_FOUND,
  MCPLANE_NOT_FOUND: Status.NOT_FOUND,
  MCPLANE_CONFLICT: Status.ABORTED,
  MCPLANE_PERMISSION_DENIED: Status.PERMISSION_DENIED,
  MCPLANE_UNAUTHENTICATED: Status.UNAUTHENTICATED,
  MCPLANE_NODE_NOT_CONNECTED: Status.FAILED_PRECONDITION,
  MCPLANE_NOT_TRYING: Status.FAILED_PRECONDITION,
  MCPLANE_STORE_LIMIT: Status.RESOURCE_EXHAUSTED,
  MCPLANE_STORE_UNAVAILABLE: Status.UNAVAILABLE,
  MCPLANE_NOT_LEADER: Status.UNAVAILABLE,
  MCPLANE_CONFIGURATION: Status.FAILED_PRECONDITION,
  MCPLANE_MANIFEST_READ: Status.INVALID_ARGUMENT,
  MCPLANE_YAML_SYNTAX: Status.INVALID_ARGUMENT,
  // Raised by the agent or mcctl, never by a server call; listed so the table stays total.
  MCPLANE_REMOTE_CALL: Status.INTERNAL,
  MCPLANE_SYSTEMD: Status.INTERNAL,
  MCPLANE_RPM_OSTREE: Status.INTERNAL,
  MCPLANE_UPDATE_STEP: Status.INTERNAL,
  MCPLANE_UNRECONCILABLE: Status.INTERNAL,
  MCPLANE_WAIT_FAILED: Status.INTERNAL,
  MCPLANE_UNSAFE_PATH: Status.INTERNAL,
  MCPLANE_JOURNAL: Status.INTERNAL,
  MCPLANE_KUBERNETES_SOURCE: Status.FAILED_PRECONDITION,
  MCPLANE_KUBERNETES_API: Status.UNAVAILABLE,
  MCPLANE_PRECONDITION_FAILED: Status.FAILED_PRECONDITION,
  MCPLANE_RATE_LIMITED: Status.RESOURCE_EXHAUSTED,
  MCPLANE_TOML_SYNTAX: Status.INVALID_ARGUMENT,
  MCPLANE_GENERATE_FAILED: Status.FAILED_PRECONDITION,
  // The agent's pinned image puller: reported in a set's status, never by a server call.
  MCPLANE_CRI_CALL: Status.INTERNAL,
  MCPLANE_PINNED_IMAGE_DISK_SPACE: Status.INTERNAL,
  MCPLANE_PINNED_IMAGE_PULL: Status.INTERNAL,
  MCPLANE_INSUFFICIENT_DISK: Status.INTERNAL,
};

export const PROBLEMS_TRAILER = 'mcplane-problems-bin';
export const ERROR_CODE_TRAILER = 'mcplane-error-code';
/** How many problems there were in all, when the problems trailer carries only the first ones. */
export const PROBLEMS_TOTAL_TRAILER = 'mcplane-problems-total';

export function toServiceError(err: unknown, log: Logger): Partial<ServiceError> {
  if (err instanceof McplaneError) {
    const metadata = new Metadata();
    metadata.set(ERROR_CODE_TRAILER, err.code);
    if (err instanceof InvalidDocumentError || err instanceof RenderError) {
      const bounded = boundProblems(err.problems);
      metadata.set(PROBLEMS_TRAILER, Buffer.from(bounded.json));
      metadata.set(PROBLEMS_TOTAL_TRAILER, String(bounded.total));
    }
    // A message can quote what the caller sent (a name, a path): bounded like the problems.
    return { code: STATUS_BY_CODE[err.code as McplaneErrorCode] ?? Status.UNKNOWN, details: boundDetails(err.message), metadata };
  }
  // Anything else is a bug: log it with its stack, tell the caller without leaking internals.
  log.error({ err }, 'internal error while handling a call');
  return { code: Status.INTERNAL, details: 'internal error (logged by the server)' };
}

/** Wraps a unary handler: resolves to the response or answers with a mapped status. */
export interface UnaryCall<Req> {
  request: Req;
  getAuthContext(): { sslPeerCertificate?: { raw?: Buffer } } | null;
}

export function unary<Req, Res>(log: Logger, handler: (request: Req, call: UnaryCall<Req>) => Promise<Res> | Res) {
  return (call: UnaryCall<Req>, callback: (err: Partial<ServiceError> | null, value?: Res) => void): void => {
    Promise.resolve()
      .then(() => handler(call.request, call))
      .then((res) => callback(null, res), (err: unknown) => callback(toServiceError(err, log)));
  };
}
