// Every unary call with a deadline, and every failure turned into a sentence an operator can act
// on: what was tried (address, TLS or not, which files), the likely cause, and never gRPC's
// internals. The error code the server puts in the `mcplane-error-code` trailer decides the
// wording, not the message text.

import { Metadata, status as Status, type CallOptions, type requestCallback, type ServiceError } from '@grpc/grpc-js';
import { formatProblem, RemoteCallError, type Problem } from '../../machineconfig/errors.ts';

// Generated clients overload each method; TypeScript infers from the last overload,
// (request, callback), so that is the shape taken here. The call itself uses the
// (request, metadata, options, callback) overload to carry the deadline.
type UnaryMethod<Req, Res> = (request: Req, callback: requestCallback<Res>) => unknown;
type FullUnaryMethod<Req, Res> = (request: Req, metadata: Metadata, options: CallOptions, callback: requestCallback<Res>) => unknown;

export interface CallTarget {
  server: string;
  /** Where reads go when not to `server` (--status-server). */
  statusServer?: string;
  timeoutMs: number;
  /** What was tried, for connection failures: address, TLS or not, which files. */
  describe?: string;
  /** Client certificate and CA files, to name them in the likely cause. */
  tls?: { ca: string; cert: string };
}

export const ERROR_CODE_TRAILER = 'mcplane-error-code';
export const PROBLEMS_TRAILER = 'mcplane-problems-bin';
/** The full number of problems when the server sent only the first ones. */
export const PROBLEMS_TOTAL_TRAILER = 'mcplane-problems-total';

export function call<Req, Res>(target: CallTarget, method: UnaryMethod<Req, Res>, request: Req, what: string): Promise<Res> {
  return new Promise((resolve, reject) => {
    const full = method as unknown as FullUnaryMethod<Req, Res>;
    full(request, new Metadata(), { deadline: new Date(Date.now() + target.timeoutMs) }, (err, res) => {
      if (err) reject(explain(err, target, what));
      else resolve(res as Res);
    });
  });
}

/** A failure in a few plain words, for one line such as "lost the watch (...)". */
export function describeFailure(err: Pick<ServiceError, 'code' | 'details'>, target?: CallTarget): string {
  // The server ended the stream (a graceful stop, a restart) rather than us cancelling it; a
  // stopping server says so in the status it ends Watch streams with.
  if (err.code === Status.CANCELLED || (err.code === Status.UNAVAILABLE && /server is shutting down/.test(err.details))) {
    return 'the server closed the stream: restarting or stopping';
  }
  if (err.code === Status.UNAVAILABLE) return connectionCause(err.details, target);
  return err.details;
}

export function explain(err: Pick<ServiceError, 'code' | 'details'> & { metadata?: Metadata }, target: CallTarget, what: string): RemoteCallError {
  const problems = problemsOf(err.metadata);
  const errorCode = String(err.metadata?.get(ERROR_CODE_TRAILER)[0] ?? '');
  const tried = target.describe ?? target.server;
  if (err.code === Status.PERMISSION_DENIED || errorCode === 'MCPLANE_PERMISSION_DENIED') {
    // Authenticated, but this operation is refused: a rule, not a credentials problem.
    return new RemoteCallError(`cannot ${what}: not allowed: ${err.details}`, err.code);
  }
  switch (err.code) {
    case Status.UNAVAILABLE:
      return new RemoteCallError(`cannot ${what}: no connection to ${tried}: ${connectionCause(err.details, target)}`, err.code);
    case Status.DEADLINE_EXCEEDED:
      return new RemoteCallError(`cannot ${what}: no answer from ${target.server}${target.statusServer && target.statusServer !== target.server ? ` (reads: ${target.statusServer})` : ''} within ${target.timeoutMs / 1000}s (raise it with --request-timeout)`, err.code);
    case Status.UNAUTHENTICATED:
      return new RemoteCallError(`cannot ${what}: the server rejected your credentials${target.tls ? ` (${target.tls.cert})` : ''}: ${err.details}`, err.code);
    case Status.INVALID_ARGUMENT:
    case Status.FAILED_PRECONDITION:
      if (problems.length) return new RemoteCallError(`${err.details.split('\n')[0]}\n${problemLines(problems, totalOf(err.metadata))}`, err.code, problems);
      return new RemoteCallError(err.code === Status.INVALID_ARGUMENT ? err.details : `cannot ${what}: ${err.details}`, err.code, problems);
    default:
      return new RemoteCallError(`cannot ${what}: ${err.details}`, err.code, problems);
  }
}

/** Every problem received, then how many more the server counted but did not send. */
export function problemLines(problems: Problem[], total: number | undefined): string {
  const lines = problems.map((p) => `  - ${formatProblem(p)}`);
  if (total !== undefined && total > problems.length) lines.push(`  ... and ${total - problems.length} more (${total} in all; fix these and apply again to see the rest)`);
  return lines.join('\n');
}

function totalOf(metadata: Metadata | undefined): number | undefined {
  const raw = metadata?.get(PROBLEMS_TOTAL_TRAILER)[0];
  const n = Number(raw === undefined ? NaN : String(raw));
  return Number.isInteger(n) && n >= 0 ? n : undefined;
}

/** The likely cause of a failed connection, from what the TLS and socket layers reported. */
function connectionCause(details: string, target?: CallTarget): string {
  const tls = target?.tls;
  if (/ECONNREFUSED/.test(details)) return 'nothing listens there (connection refused): is mcplane-server running, and on this port?';
  if (/Name resolution failed|ENOTFOUND|EAI_AGAIN/.test(details)) return 'the host name does not resolve: check the address';
  if (/ETIMEDOUT|EHOSTUNREACH|ENETUNREACH/.test(details)) return 'the host cannot be reached (network, firewall or a wrong address)';
  if (/altname|Hostname\/IP does not match/i.test(details)) return 'the server\'s certificate does not name this address: connect by a name it holds (mcctl pki init --host NAME)';
  if (/expired/i.test(details)) return 'a certificate has expired';
  if (/self[- ]signed|unable to (verify|get local issuer)|certificate/i.test(details)) {
    return `the server's certificate is not signed by the CA in ${tls?.ca ?? 'the given CA file'}: is that the CA of this server?`;
  }
  if (/wrong version number|packet length|http\/1|unexpected eof|record/i.test(details)) {
    return 'the server does not speak TLS there: it may run with --insecure, or this port is not mcplane-server\'s';
  }
  if (/Failed to connect|Connection dropped|ECONNRESET|socket (hang up|closed)|closed/i.test(details)) {
    return tls
      ? `the server closed the connection during the TLS handshake: it most likely rejected the client certificate ${tls.cert} (not signed by the server's CA?)`
      : 'the server closed the connection: it most likely expects TLS (drop --insecure and give credentials with --pki-dir)';
  }
  return 'no connection could be made';
}

function problemsOf(metadata: Metadata | undefined): Problem[] {
  const raw = metadata?.get(PROBLEMS_TRAILER)[0];
  if (!raw) return [];
  try {
    return JSON.parse(Buffer.from(raw as Buffer).toString('utf8')) as Problem[];
  } catch {
    return [];
  }
}
