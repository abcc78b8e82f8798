// Every unary call with a deadline, and every failure turned into a sentence: grpc-js reports a
// rejected client certificate as UNAVAILABLE, which on its own tells an operator nothing.

import { Metadata, status as Status, type CallOptions, type requestCallback, type ServiceError } from '@grpc/grpc-js';
import { formatProblem, RemoteCallError, type Problem } from '../../machineconfig/index.ts';

// Generated clients overload each method; TypeScript infers from the last overload,
// (request, callback), so that is the shape taken here. The call itself uses the
// (request, metadata, options, callback) overload to carry the deadline.
type UnaryMethod<Req, Res> = (request: Req, callback: requestCallback<Res>) => unknown;
type FullUnaryMethod<Req, Res> = (request: Req, metadata: Metadata, options: CallOptions, callback: requestCallback<Res>) => unknown;

export interface CallTarget {
  server: string;
  timeoutMs: number;
  /** What was tried, for connection failures: address, TLS or not, which files. */
  describe?: string;
}

export function call<Req, Res>(target: CallTarget, method: UnaryMethod<Req, Res>, request: Req, what: string): Promise<Res> {
  return new Promise((resolve, reject) => {
    const full = method as unknown as FullUnaryMethod<Req, Res>;
    full(request, new Metadata(), { deadline: new Date(Date.now() + target.timeoutMs) }, (err, res) => {
      if (err) reject(explain(err, target.server, target.timeoutMs, what, target.describe));
      else resolve(res as Res);
    });
  });
}

/** A failure in a few plain words, for one line such as "lost the watch (...)". */
export function describeFailure(err: Pick<ServiceError, 'code' | 'details'>): string {
  return err.details;
}

export function explain(err: ServiceError, server: string, timeoutMs: number, what: string, _describe?: string): RemoteCallError {
  const problems = problemsOf(err.metadata);
  switch (err.code) {
    case Status.UNAVAILABLE:
      return new RemoteCallError(
        `cannot ${what}: the server at ${server} is unreachable or refused the connection (${err.details}). ` +
        'Check that mcplane-server runs there and that your certificate is signed by its CA: a rejected client certificate also shows up as UNAVAILABLE.',
        err.code);
    case Status.DEADLINE_EXCEEDED:
      return new RemoteCallError(`cannot ${what}: no answer from ${server} within ${timeoutMs / 1000}s (raise it with --timeout)`, err.code);
    case Status.UNAUTHENTICATED:
    case Status.PERMISSION_DENIED:
      return new RemoteCallError(`cannot ${what}: the server rejected your credentials: ${err.details}`, err.code);
    case Status.INVALID_ARGUMENT:
      return new RemoteCallError(problems.length
        ? `${err.details.split('\n')[0]}\n${problems.map((p) => `  - ${formatProblem(p)}`).join('\n')}`
        : err.details, err.code, problems);
    default:
      return new RemoteCallError(`cannot ${what}: ${err.details}`, err.code, problems);
  }
}

function problemsOf(metadata: Metadata | undefined): Problem[] {
  const raw = metadata?.get('mcplane-problems-bin')[0];
  if (!raw) return [];
  try {
    return JSON.parse(Buffer.from(raw as Buffer).toString('utf8')) as Problem[];
  } catch {
    return [];
  }
}
