// mcplane's certificate authority: a CA, server certificates, and client certificates whose
// subject says who the caller is. The organization (O) is the role, the common name (CN) the
// identity: O=mcplane:nodes,CN=<node name> for agents, O=mcplane:admins for operators. The
// server trusts only certificates its CA signed, so a node cannot claim another's name.

// @peculiar/x509 resolves its ASN.1 codecs through tsyringe, which needs this polyfill loaded first.
import 'reflect-metadata';
import { createPrivateKey, createPublicKey, webcrypto, X509Certificate as NodeX509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import * as x509 from '@peculiar/x509';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export const ROLE_NODE = 'mcplane:nodes';
export const ROLE_ADMIN = 'mcplane:admins';
/** API callers that may change some things (pause, label, re-apply, enrollment decisions): api-roles.ts. */
export const ROLE_OPERATOR = 'mcplane:operators';
/** API callers that may read and watch only. */
export const ROLE_VIEWER = 'mcplane:viewers';
/**
 * mcplane-server replicas, as etcd clients (mcctl pki replica): never accepted on mcplane's gRPC.
 * Their CN is REPLICA_CN_PREFIX + name because etcd (--client-cert-auth with auth enabled) takes
 * the CN as its user name and cannot see O: '@' is not allowed in a node name (a DNS subdomain),
 * so no node certificate can carry the name of a replica's etcd user. Not ':', which
 * `etcdctl user add` reads as user:password.
 */
export const ROLE_REPLICA = 'mcplane:replicas';
export const REPLICA_CN_PREFIX = 'mcplane-replica@';
/**
 * Names no node may take: an etcd that trusts mcplane's CA maps a certificate's CN to its user,
 * and etcd's administrator is always called root, so a node named root would be etcd's root.
 */
export const RESERVED_NODE_NAMES: ReadonlySet<string> = new Set(['root']);
export type Role = typeof ROLE_NODE | typeof ROLE_ADMIN;

const KEY_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING_ALGORITHM = { name: 'ECDSA', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;
/**
 * How long a node certificate is valid unless the server is told otherwise
 * (--node-certificate-lifetime): agents renew at two thirds of it over their stream, so a
 * short life costs nothing and bounds how long a stolen key is good for.
 */
export const DEFAULT_NODE_CERTIFICATE_LIFETIME_MS = 90 * DAY_MS;
/** Server, operator and replica certificates (renewed by hand, so longer). */
const DEFAULT_LIFETIME_MS = 825 * DAY_MS;
/** Backdated by at most this much, for clocks a little behind the signer's. */
const MAX_BACKDATE_MS = 60_000;

export interface KeyPairPem {
  /**
   * The CA certificate. For a signer it may be a bundle (during a CA rollover, old and new): the
   * certificate that signs is the one whose public key is keyPem's.
   */
  certPem: string;
  keyPem: string;
  /** For a signer: the lifetime of node certificates it issues (default 90 days). */
  nodeLifetimeMs?: number;
}

export interface Identity {
  commonName: string;
  organization: string;
  /**
   * For a node: the pool its credential was made for (OU), which binds its role, as
   * Kubernetes' NodeRestriction binds a kubelet's. Empty in certificates made before pools
   * were bound; those nodes are treated as workers.
   */
  organizationalUnit: string;
}

export async function createCertificateAuthority(commonName = 'mcplane CA', validDays = 3650): Promise<KeyPairPem> {
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `CN=${escapeDn(commonName)}`,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + validDays * DAY_MS),
    signingAlgorithm: SIGNING_ALGORITHM,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKey(keys.privateKey) };
}

export interface IssueOptions {
  commonName: string;
  organization?: string;
  /** For a node: the pool it is bound to; for an operator: the pools it may act on (one OU each). */
  organizationalUnit?: string | readonly string[];
  /**
   * For a node: the certificate generation of its name when issued (see NODE_GENERATION_ATTRIBUTE);
   * 0 (the default) writes none, as every certificate made before generations did.
   */
  generation?: number;
  /** Server certificates: DNS names and IP addresses the server answers on. */
  hosts?: string[];
  usage: 'server' | 'client';
  validDays?: number;
  /** Overrides validDays; node certificates default to the signer's nodeLifetimeMs. */
  validityMs?: number;
}

export async function issueCertificate(ca: KeyPairPem, options: IssueOptions): Promise<KeyPairPem> {
  const keys = await generateKeys();
  const certPem = await signPublicKey(ca, keys.publicKey, options);
  return { certPem, keyPem: await exportKey(keys.privateKey) };
}

/**
 * Signs a certificate signing request. The subject is set by the caller (the enrollment
 * endpoint), never taken from the request: a host proves its key, not its name.
 */
export async function signCertificateRequest(ca: KeyPairPem, csrPem: string, options: IssueOptions): Promise<string> {
  const csr = new x509.Pkcs10CertificateRequest(csrPem);
  if (!(await csr.verify())) throw new Error('the certificate request signature does not verify');
  return signPublicKey(ca, await csr.publicKey.export(), options);
}

/**
 * The SHA-256 (hex) of a certificate request's public key (its DER SubjectPublicKeyInfo), once
 * its signature verifies: a name for the request only the key's holder could have made.
 */
export async function certificateRequestKeyId(csrPem: string): Promise<string> {
  const csr = new x509.Pkcs10CertificateRequest(csrPem);
  if (!(await csr.verify())) throw new Error('the certificate request signature does not verify');
  return Buffer.from(await webcrypto.subtle.digest('SHA-256', csr.publicKey.rawData)).toString('hex');
}

/**
 * A node's certificate from its CSR: O=mcplane:nodes, OU=<pool> (the binding to its pool),
 * CN=<node>. Enrollment, approved enrollment requests and renewals all sign through this.
 */
export function signNodeCertificate(ca: KeyPairPem, csrPem: string, node: string, pool: string, generation: number): Promise<string> {
  return signCertificateRequest(ca, csrPem, { commonName: node, organization: ROLE_NODE, organizationalUnit: pool, generation, usage: 'client' });
}

/**
 * The subject attribute that carries a node certificate's generation: X.520's
 * generationQualifier (2.5.4.44), printed by OpenSSL and node:crypto under that name. A node
 * name's generation rises with each `mcctl node revoke` and `mcctl delete node`, and the
 * control plane refuses every certificate of an older one: a revoke then covers every
 * certificate ever issued for the name (renewals included), not only the one bound last.
 */
const NODE_GENERATION_OID = '2.5.4.44';
const NODE_GENERATION_ATTRIBUTE = 'generationQualifier';

/** A CSR for CN=<commonName> with a new key, or with `keyPem` (the same request id as before). */
export async function createCertificateRequest(commonName: string, keyPem?: string): Promise<{ csrPem: string; keyPem: string }> {
  const keys = keyPem === undefined ? await generateKeys() : await keyPairOf(keyPem);
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: `CN=${escapeDn(commonName)}`,
    keys,
    signingAlgorithm: SIGNING_ALGORITHM,
  });
  return { csrPem: csr.toString('pem'), keyPem: keyPem ?? await exportKey(keys.privateKey) };
}

/** The identity in a peer certificate as grpc-js and node:tls hand it over (DER or PEM). */
export function identityOf(certificate: Buffer | string): Identity {
  return identityIn(new NodeX509Certificate(certificate));
}

/**
 * The identity and the binding of one certificate, parsed once: a node's every call needs both,
 * and parsing is most of what checking a caller costs when a replica's agents arrive at once.
 */
export function peerCertificateFacts(certificate: Buffer | string): { identity: Identity; binding: CertificateBinding } {
  const cert = new NodeX509Certificate(certificate);
  return { identity: identityIn(cert), binding: bindingIn(cert) };
}

function identityIn(cert: NodeX509Certificate): Identity {
  const fields = parseDn(cert.subject);
  return { commonName: fields.CN ?? '', organization: fields.O ?? '', organizationalUnit: fields.OU ?? '' };
}

/**
 * What ties a node record to one certificate: its SHA-256 fingerprint (what is compared), and its
 * serial and expiry (what operators read).
 */
export interface CertificateBinding {
  sha256: string;
  serial: string;
  /** Unix milliseconds. */
  notAfter: number;
  /** The node name's generation it was issued at; absent for 0 (NODE_GENERATION_ATTRIBUTE). */
  generation?: number;
}

export function certificateBinding(certificate: Buffer | string): CertificateBinding {
  return bindingIn(new NodeX509Certificate(certificate));
}

function bindingIn(cert: NodeX509Certificate): CertificateBinding {
  const generation = generationIn(cert.subject);
  return {
    sha256: cert.fingerprint256.replaceAll(':', '').toLowerCase(),
    serial: cert.serialNumber.toLowerCase(),
    notAfter: Date.parse(cert.validTo),
    ...(generation ? { generation } : {}),
  };
}

/** The generation a subject carries: 0 without the attribute, -1 (older than any) when malformed. */
function generationIn(subject: string): number {
  const text = parseDn(subject)[NODE_GENERATION_ATTRIBUTE];
  if (text === undefined) return 0;
  return /^(0|[1-9][0-9]{0,14})$/.test(text) ? Number(text) : -1;
}

/** The generation of a node certificate's binding (0 when it carries none). */
export function generationOf(binding: Pick<CertificateBinding, 'generation'>): number {
  return binding.generation ?? 0;
}

/** A CA of a trust bundle, parsed once: streams are checked against it at every registration. */
export interface TrustedCa {
  /** SHA-256 of the CA certificate (hex). */
  fingerprint: string;
  certificate: NodeX509Certificate;
}

/** The CAs of a trust bundle. */
export function trustedCas(bundlePem: string): TrustedCa[] {
  return splitPemBundle(bundlePem).map((pem) => {
    const certificate = new NodeX509Certificate(pem);
    return { fingerprint: fingerprintOf(certificate), certificate };
  });
}

/**
 * The fingerprint of the CA among `cas` that issued `certificate`, by name and key identifier
 * (no signature check: TLS checked that at the handshake); undefined when none did. A stream is
 * ended when its issuer leaves the trust bundle.
 */
export function issuerAmong(certificate: Buffer | string, cas: readonly TrustedCa[]): string | undefined {
  const cert = new NodeX509Certificate(certificate);
  return cas.find((ca) => cert.checkIssued(ca.certificate))?.fingerprint;
}

function fingerprintOf(cert: NodeX509Certificate): string {
  return cert.fingerprint256.replaceAll(':', '').toLowerCase();
}

/** Whether `certPem` was signed by `caPem` and is valid now. */
export function verifyIssuedBy(certPem: string | Buffer, caPem: string | Buffer): boolean {
  const cert = new NodeX509Certificate(certPem);
  const ca = new NodeX509Certificate(caPem);
  const now = Date.now();
  return cert.checkIssued(ca) && cert.verify(ca.publicKey) &&
    Date.parse(cert.validFrom) <= now && now <= Date.parse(cert.validTo);
}

/** The certificates in a PEM bundle, each as PEM. */
export function splitPemBundle(pem: string): string[] {
  return pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)?.map((c) => `${c}\n`) ?? [];
}

/**
 * The certificate in `bundlePem` whose public key is `keyPem`'s: the CA that signs, in a trust
 * bundle that may hold several (a rollover's old and new). Undefined when none matches.
 */
export function signerCertificate(bundlePem: string, keyPem: string): string | undefined {
  const publicDer = createPublicKey(createPrivateKey(keyPem)).export({ type: 'spki', format: 'der' });
  return splitPemBundle(bundlePem).find((pem) => new NodeX509Certificate(pem).publicKey.export({ type: 'spki', format: 'der' }).equals(publicDer));
}

/** The CA in `bundlePem` that issued `certPem` (signature checked), if any. */
export function issuerIn(certPem: string | Buffer, bundlePem: string): string | undefined {
  const cert = new NodeX509Certificate(certPem);
  return splitPemBundle(bundlePem).find((pem) => {
    const ca = new NodeX509Certificate(pem);
    return cert.checkIssued(ca) && cert.verify(ca.publicKey);
  });
}

/**
 * Why `certificate` cannot be the identity of `node` (and of `pool`, when given) holding
 * `keyPem`, issued by a CA of `caBundlePem`; '' when it can. An agent takes no certificate that
 * fails this, from enrollment or from a renewal: written, it would be the key pair it starts with.
 */
export function certificateProblem(certificate: unknown, keyPem: string, caBundlePem: string, node: string, pool?: string): string {
  if (typeof certificate !== 'string') return 'the answer has no certificate';
  let cert: NodeX509Certificate;
  try {
    cert = new NodeX509Certificate(certificate);
  } catch {
    return 'it is not a certificate';
  }
  const subject = cert.subject.split('\n');
  if (!cert.checkPrivateKey(createPrivateKey(keyPem))) return 'it is not for the key this host asked with';
  if (!subject.includes(`CN=${node}`) || (pool !== undefined && !subject.includes(`OU=${pool}`))) return `it names ${subject.join(', ')}, not CN=${node}${pool === undefined ? '' : `, OU=${pool}`}`;
  if (!issuerIn(certificate, caBundlePem)) return 'no CA it is checked against issued it';
  return '';
}

/** Validity of a certificate, Unix milliseconds, and when its holder should renew it (2/3 in). */
export function certificateValidity(certPem: string | Buffer): { notBefore: number; notAfter: number; renewAt: number; issuer: string; subject: string } {
  const cert = new NodeX509Certificate(certPem);
  const notBefore = Date.parse(cert.validFrom);
  const notAfter = Date.parse(cert.validTo);
  return { notBefore, notAfter, renewAt: notBefore + Math.round(((notAfter - notBefore) * 2) / 3), issuer: cert.issuer, subject: cert.subject };
}

async function signPublicKey(ca: KeyPairPem, publicKey: CryptoKey, options: IssueOptions): Promise<string> {
  const bundle = splitPemBundle(ca.certPem);
  const signerPem = bundle.length > 1 ? signerCertificate(ca.certPem, ca.keyPem) : bundle[0];
  if (!signerPem) throw new Error('no certificate in the CA bundle matches the CA key');
  const caCert = new x509.X509Certificate(signerPem);
  const caKey = await importKey(ca.keyPem);
  const subject = [`CN=${escapeDn(options.commonName)}`];
  for (const unit of [options.organizationalUnit ?? []].flat()) if (unit) subject.push(`OU=${escapeDn(unit)}`);
  if (options.organization) subject.push(`O=${escapeDn(options.organization)}`);
  if (options.generation) {
    if (!Number.isSafeInteger(options.generation) || options.generation < 0) throw new Error(`a certificate generation is a whole number >= 0, not ${options.generation}`);
    subject.push(`${NODE_GENERATION_OID}=${options.generation}`);
  }
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement, true),
    new x509.ExtendedKeyUsageExtension([options.usage === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth]),
    await x509.AuthorityKeyIdentifierExtension.create(caCert),
  ];
  if (options.hosts?.length) {
    extensions.push(new x509.SubjectAlternativeNameExtension(
      options.hosts.map((h) => ({ type: isIP(h) ? 'ip' : 'dns', value: h }) as x509.JsonGeneralName),
    ));
  }
  const validityMs = options.validityMs ?? (options.validDays !== undefined ? options.validDays * DAY_MS
    : options.organization === ROLE_NODE ? ca.nodeLifetimeMs ?? DEFAULT_NODE_CERTIFICATE_LIFETIME_MS : DEFAULT_LIFETIME_MS);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: subject.join(', '),
    issuer: caCert.subject,
    notBefore: new Date(now - Math.min(MAX_BACKDATE_MS, Math.round(validityMs / 10))),
    notAfter: new Date(now + validityMs),
    signingAlgorithm: SIGNING_ALGORITHM,
    publicKey,
    signingKey: caKey,
    extensions,
  });
  return cert.toString('pem');
}

async function generateKeys(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
}

async function exportKey(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

/** A key pair from a PKCS#8 private key: a request made again with the key it was made with. */
async function keyPairOf(pem: string): Promise<CryptoKeyPair> {
  const spki = createPublicKey(pem).export({ type: 'spki', format: 'der' });
  return { privateKey: await importKey(pem), publicKey: await webcrypto.subtle.importKey('spki', spki, KEY_ALGORITHM, true, ['verify']) };
}

async function importKey(pem: string): Promise<CryptoKey> {
  const der = x509.PemConverter.decode(pem)[0]!;
  return webcrypto.subtle.importKey('pkcs8', der, KEY_ALGORITHM, false, ['sign']);
}

function randomSerial(): string {
  // Positive, 16 bytes: the top bit cleared so DER does not read it as negative.
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = bytes[0]! & 0x7f;
  return Buffer.from(bytes).toString('hex');
}

function escapeDn(value: string): string {
  return value.replace(/([,+"\\<>;=])/g, '\\$1');
}

/** node:crypto prints a subject as "CN=x\nO=y". */
function parseDn(subject: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of subject.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) out[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return out;
}
