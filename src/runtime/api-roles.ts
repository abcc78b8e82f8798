// The roles of the people and tools that call mcplane's API, as their certificates carry them:
// the organization (O) is the role, each organizational unit (OU) a pool an operator is limited
// to. `mcctl pki operator` issues them; the server checks them per RPC (access-rules.ts).
//
//   O=mcplane:viewers     every read and Watch, nothing that writes
//   O=mcplane:operators   also pause/resume, label, re-apply, approve/deny enrollments; with OUs,
//                         only on those pools
//   O=mcplane:admins      everything (the admin.crt of `mcctl pki init`; it carries no OU)

import { X509Certificate } from 'node:crypto';
import { ROLE_ADMIN, ROLE_OPERATOR, ROLE_VIEWER } from './pki.ts';

export const API_ROLES = ['viewer', 'operator', 'admin'] as const;
export type ApiRole = (typeof API_ROLES)[number];

/** The certificate organization of each role. */
export const ROLE_ORGANIZATIONS: Record<ApiRole, string> = { viewer: ROLE_VIEWER, operator: ROLE_OPERATOR, admin: ROLE_ADMIN };

/** What each role includes: an admin may do what an operator may, an operator what a viewer may. */
export const ROLE_RANK: Record<ApiRole, number> = { viewer: 1, operator: 2, admin: 3 };

/** Who is calling, as far as the API's rules care. */
export interface ApiCaller {
  /** The API role; undefined for a certificate of no API role (a node's, a replica's). */
  role: ApiRole | undefined;
  /** The pools an operator is limited to; empty: every pool. */
  pools: string[];
  /** The certificate's subject, one line (`CN=alice, O=mcplane:operators, OU=edge`). */
  subject: string;
  /** Lower-case hex; '' in plaintext mode. */
  serial: string;
  commonName: string;
  organization: string;
}

/** The caller plaintext mode (loopback development only) trusts: every local caller is admin. */
export const LOCAL_CALLER: ApiCaller = { role: 'admin', pools: [], subject: 'local (plaintext, loopback)', serial: '', commonName: 'local', organization: '' };

/** The caller a client certificate (DER or PEM) names. */
export function apiCallerOf(certificate: Buffer | string): ApiCaller {
  const cert = new X509Certificate(certificate);
  // node:crypto prints a subject as one attribute a line ("CN=x\nOU=a\nOU=b\nO=y").
  const attributes = cert.subject.split('\n').map((line) => {
    const eq = line.indexOf('=');
    return { type: line.slice(0, eq), value: line.slice(eq + 1) };
  }).filter((a) => a.type);
  const first = (type: string): string => attributes.find((a) => a.type === type)?.value ?? '';
  const organization = first('O');
  const role = API_ROLES.find((r) => ROLE_ORGANIZATIONS[r] === organization);
  return {
    role,
    // An admin's OUs limit nothing: admins are not scoped (the "everything, PKI included").
    pools: role === 'operator' ? attributes.filter((a) => a.type === 'OU').map((a) => a.value) : [],
    subject: attributes.map((a) => `${a.type}=${a.value}`).join(', '),
    serial: cert.serialNumber.toLowerCase(),
    commonName: first('CN'),
    organization,
  };
}
