// Who is calling, from the TLS client certificate: O=mcplane:nodes,CN=<node> for agents,
// O=mcplane:viewers / mcplane:operators / mcplane:admins for people and tools (api-roles.ts;
// what each may call: access-rules.ts). Without TLS (allowed only on loopback, and only when
// asked for) every local caller is trusted as an admin, and an agent as the node it names.

import { PermissionDeniedError, UnauthenticatedError, WORKER_POOL } from '../../machineconfig/index.ts';
import { apiCallerOf, LOCAL_CALLER, type ApiCaller } from '../../runtime/api-roles.ts';
import { identityOf, peerCertificateFacts, ROLE_NODE, type CertificateBinding, type Identity } from '../../runtime/pki.ts';

interface CallWithAuth {
  getAuthContext?: () => { sslPeerCertificate?: { raw?: Buffer } } | null;
}

export interface Authorizer {
  /** The caller's identity; undefined in plaintext mode. */
  identify(call: CallWithAuth): Identity | undefined;
  /** The caller's API role, pools and certificate (LOCAL_CALLER, an admin, in plaintext mode). */
  caller(call: CallWithAuth): ApiCaller;
  /**
   * The node the caller may act as and the pool its credential binds it to; undefined when any
   * (plaintext, loopback development only).
   */
  requireNode(call: CallWithAuth): CertifiedNode | undefined;
}

export interface CertifiedNode {
  name: string;
  pool: string;
  /** The certificate itself: a node record is bound to exactly one. */
  certificate: CertificateBinding;
  /** Its DER: which CA issued it decides how long its stream may stay open (a CA retired). */
  der: Buffer;
}

export function createAuthorizer(tls: boolean): Authorizer {
  /** The peer's certificate: grpc-js builds it anew from the TLS socket on each ask, so once a call. */
  const peerCertificate = (call: CallWithAuth): Buffer | undefined => {
    if (!tls) return undefined;
    const raw = call.getAuthContext?.()?.sslPeerCertificate?.raw;
    if (!raw) throw new UnauthenticatedError('no client certificate presented');
    return raw;
  };
  const identify = (call: CallWithAuth): Identity | undefined => {
    const raw = peerCertificate(call);
    return raw && identityOf(raw);
  };
  return {
    identify,
    caller(call) {
      const raw = peerCertificate(call);
      return raw ? apiCallerOf(raw) : LOCAL_CALLER;
    },
    requireNode(call) {
      const raw = peerCertificate(call);
      if (!raw) return undefined;
      const { identity: id, binding } = peerCertificateFacts(raw);
      if (id.organization !== ROLE_NODE || !id.commonName) {
        throw new PermissionDeniedError(`certificate ${describe(id)} is not a node certificate (O=${ROLE_NODE}, CN=<node name>)`);
      }
      // Certificates made before pools were bound carry no OU: they stay workers.
      return { name: id.commonName, pool: id.organizationalUnit || WORKER_POOL, certificate: binding, der: raw };
    },
  };
}

function describe(id: Identity): string {
  return `CN=${id.commonName || '<none>'}, O=${id.organization || '<none>'}`;
}
