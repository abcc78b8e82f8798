// TLS material for gRPC: every connection is mutual TLS unless plaintext is asked for, and
// plaintext is allowed only on a loopback address.

import { credentials, experimental, ServerCredentials, type ChannelCredentials } from '@grpc/grpc-js';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import { isIP } from 'node:net';
import { ConfigurationError } from '../machineconfig/errors.ts';

export interface TlsFiles {
  ca: string;
  cert: string;
  key: string;
}

export interface TlsMaterial {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

export function readTlsFiles(files: TlsFiles, what: string): TlsMaterial {
  const read = (path: string, field: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new ConfigurationError(`${what}: cannot read ${field} ${path}: ${(err as Error).message}`);
    }
  };
  return { ca: read(files.ca, 'CA certificate'), cert: read(files.cert, 'certificate'), key: read(files.key, 'private key') };
}

/**
 * TLS files that are read again on reload() (SIGHUP) or when they change on disk, for a server
 * whose certificate, key or trust bundle is replaced while it runs. New TLS handshakes use what
 * was read last; connections already open keep theirs, so agents' streams stay up. A set of
 * files that does not fit together (a key that is not the certificate's, a file half copied)
 * is refused and the last good one kept: the next change or reload tries again.
 */
export class ReloadingTls implements experimental.CertificateProvider {
  #material: TlsMaterial;
  readonly #caListeners = new Set<experimental.CaCertificateUpdateListener>();
  readonly #identityListeners = new Set<experimental.IdentityCertificateUpdateListener>();
  readonly #changeListeners = new Set<(material: TlsMaterial) => void>();
  #watching = false;
  #timer: NodeJS.Timeout | undefined;

  readonly files: TlsFiles;
  private readonly what: string;
  private readonly onError: (message: string) => void;
  constructor(files: TlsFiles, what: string, onError: (message: string) => void = () => {}) {
    this.files = files;
    this.what = what;
    this.onError = onError;
    this.#material = checkTlsMaterial(readTlsFiles(files, what), files, what);
  }

  get material(): TlsMaterial {
    return this.#material;
  }

  /** Reads the files again; true when something changed and was taken. Never throws. */
  reload(): boolean {
    let next: TlsMaterial;
    try {
      next = checkTlsMaterial(readTlsFiles(this.files, this.what), this.files, this.what);
    } catch (err) {
      this.onError(`${(err as Error).message}; still using the files read before`);
      return false;
    }
    const old = this.#material;
    if (old.ca.equals(next.ca) && old.cert.equals(next.cert) && old.key.equals(next.key)) return false;
    this.#material = next;
    if (!old.ca.equals(next.ca)) for (const l of this.#caListeners) l({ caCertificate: next.ca });
    if (!old.cert.equals(next.cert) || !old.key.equals(next.key)) for (const l of this.#identityListeners) l({ certificate: next.cert, privateKey: next.key });
    for (const l of this.#changeListeners) l(next);
    return true;
  }

  /** Called with the new material after each reload that changed something. */
  onChange(listener: (material: TlsMaterial) => void): void {
    this.#changeListeners.add(listener);
  }

  /** Polls the files' modification times (fs.watch misses a rename over a watched file). */
  watch(intervalMs: number): void {
    if (this.#watching) return;
    this.#watching = true;
    const changed = (): void => {
      // A copy of several files lands over some milliseconds: read once they have settled.
      clearTimeout(this.#timer);
      this.#timer = setTimeout(() => this.reload(), 100);
      this.#timer.unref();
    };
    for (const f of new Set(Object.values(this.files))) watchFile(f, { interval: intervalMs, persistent: false }, changed);
  }

  close(): void {
    clearTimeout(this.#timer);
    if (this.#watching) for (const f of new Set(Object.values(this.files))) unwatchFile(f);
    this.#watching = false;
  }

  /** Server credentials that follow this object: mutual TLS, client certificates required. */
  serverCredentials(): ServerCredentials {
    // grpc-js's parameter names are swapped (the first is the identity provider): this object is both.
    return experimental.createCertificateProviderServerCredentials(this, this, true);
  }

  // The first update goes out after the caller has finished registering its own watcher: grpc-js
  // adds ours before its server's, and an update delivered in between would never reach the server.
  addCaCertificateListener(listener: experimental.CaCertificateUpdateListener): void {
    this.#caListeners.add(listener);
    queueMicrotask(() => { if (this.#caListeners.has(listener)) listener({ caCertificate: this.#material.ca }); });
  }

  removeCaCertificateListener(listener: experimental.CaCertificateUpdateListener): void {
    this.#caListeners.delete(listener);
  }

  addIdentityCertificateListener(listener: experimental.IdentityCertificateUpdateListener): void {
    this.#identityListeners.add(listener);
    queueMicrotask(() => { if (this.#identityListeners.has(listener)) listener({ certificate: this.#material.cert, privateKey: this.#material.key }); });
  }

  removeIdentityCertificateListener(listener: experimental.IdentityCertificateUpdateListener): void {
    this.#identityListeners.delete(listener);
  }
}

/** The certificate must be the key's, and the CA file must hold at least one certificate. */
export function checkTlsMaterial(m: TlsMaterial, files: TlsFiles, what: string): TlsMaterial {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(m.cert);
  } catch (err) {
    throw new ConfigurationError(`${what}: ${files.cert} is not a PEM certificate (${(err as Error).message})`);
  }
  try {
    if (!cert.checkPrivateKey(createPrivateKey(m.key))) throw new Error('it is not the private key of the certificate');
  } catch (err) {
    throw new ConfigurationError(`${what}: private key ${files.key} does not fit certificate ${files.cert}: ${(err as Error).message}`);
  }
  try {
    new X509Certificate(m.ca);
  } catch (err) {
    throw new ConfigurationError(`${what}: ${files.ca} holds no PEM certificate (${(err as Error).message})`);
  }
  return m;
}

export function serverCredentials(tls: TlsMaterial | undefined): ServerCredentials {
  if (!tls) return ServerCredentials.createInsecure();
  return ServerCredentials.createSsl(tls.ca, [{ cert_chain: tls.cert, private_key: tls.key }], true);
}

export function clientCredentials(tls: TlsMaterial | undefined): ChannelCredentials {
  if (!tls) return credentials.createInsecure();
  return credentials.createSsl(tls.ca, tls.key, tls.cert);
}

/** Hosts that name this machine only; plaintext never leaves them. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1';
  return false;
}

/** Splits "host:port", "[v6]:port"; throws a ConfigurationError naming the flag. */
export function parseHostPort(address: string, flag: string): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(address);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) throw new ConfigurationError(`${flag}: "${address}" is not HOST:PORT (e.g. 127.0.0.1:7443)`);
  return { host: m[1]!, port };
}
