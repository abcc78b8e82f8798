// The apiserver's error shape: every failure is a meta/v1 Status with code, reason and message
// (k8s.io/apimachinery/pkg/api/errors), which is what @kubernetes/client-node hands its caller.

export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

export interface ApiStatus {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message: string;
  reason: string;
  details?: { name?: string; group?: string; kind?: string; causes?: StatusCause[] };
  code: number;
}

/** A Status thrown through the stand-in's handlers and written as the response. */
export class StatusError extends Error {
  readonly status: ApiStatus;
  constructor(status: ApiStatus) {
    super(status.message);
    this.status = status;
  }
}

function failure(code: number, reason: string, message: string, details?: ApiStatus['details']): StatusError {
  return new StatusError({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code });
}

/** What the apiserver calls the resource in messages: `nodes "n1"`, `machineconfigpools.machineconfiguration.openshift.io "worker"`. */
function qualified(group: string, plural: string): string {
  return group ? `${plural}.${group}` : plural;
}

export const apiErrors = {
  unauthorized: () => failure(401, 'Unauthorized', 'Unauthorized'),
  notFound: (group: string, plural: string, name: string) =>
    failure(404, 'NotFound', `${qualified(group, plural)} "${name}" not found`, { name, ...(group ? { group } : {}), kind: plural }),
  pathNotFound: (path: string) => failure(404, 'NotFound', `the server could not find the requested resource (${path})`),
  alreadyExists: (group: string, plural: string, name: string) =>
    failure(409, 'AlreadyExists', `${qualified(group, plural)} "${name}" already exists`, { name, ...(group ? { group } : {}), kind: plural }),
  conflict: (group: string, plural: string, name: string) =>
    failure(409, 'Conflict', `Operation cannot be fulfilled on ${qualified(group, plural)} "${name}": the object has been modified; please apply your changes to the latest version and try again`, { name, ...(group ? { group } : {}), kind: plural }),
  gone: (message: string) => failure(410, 'Expired', message),
  badRequest: (message: string) => failure(400, 'BadRequest', message),
  invalid: (kind: string, name: string, causes: StatusCause[]) =>
    failure(422, 'Invalid', `${kind} "${name}" is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join(', ')}`, { name, kind, causes }),
  methodNotAllowed: (method: string) => failure(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource (${method})`),
  unsupportedMediaType: (type: string) => failure(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got ${type})`),
  tooManyRequests: (message: string, causes: StatusCause[]) => failure(429, 'TooManyRequests', message, { causes }),
  internal: (message: string) => failure(500, 'InternalError', message),
};
