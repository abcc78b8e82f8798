// The agent's key, certificate and trust bundle after a renewal. Two files cannot be renamed in
// one step, so the pair goes through "<file>.next" names, each written durably first:
//
//   1. key.next, then cert.next    (a crash here: key.next alone is an unfinished pair, dropped)
//   2. rename key.next -> key      (a crash here: cert.next alone, the key is already in place)
//   3. rename cert.next -> cert
//
// recoverCertificateFiles() at start finishes or drops whatever a crash left, so the key and the
// certificate on disk always belong together: the old pair until the new one is complete. The
// server accepts both meanwhile (the renewed one is bound, the old one stays accepted until the
// agent registers with the new one), so either is a working identity.

import { existsSync } from 'node:fs';
import type { Logger } from '../runtime/logger.ts';
import type { TlsFiles } from '../runtime/tls.ts';
import { commitRename, unlinkDurable, writeFileAtomic } from './durable-fs.ts';

const next = (path: string): string => `${path}.next`;

export function storeRenewedCertificate(files: TlsFiles, pem: { key: string; cert: string; ca: string }): void {
  // The bundle first: it is a superset of what verified the server until now (a rollover adds
  // the new CA before anything is signed by it), so writing it early breaks nothing.
  writeFileAtomic(files.ca, pem.ca, { mode: 0o644 });
  writeFileAtomic(next(files.key), pem.key, { mode: 0o600 });
  writeFileAtomic(next(files.cert), pem.cert, { mode: 0o644 });
  commitRename(next(files.key), files.key);
  commitRename(next(files.cert), files.cert);
}

/** Finishes a renewal a crash interrupted, or drops its unfinished half. */
export function recoverCertificateFiles(files: TlsFiles, log: Logger): void {
  const keyNext = existsSync(next(files.key));
  const certNext = existsSync(next(files.cert));
  if (keyNext && certNext) {
    commitRename(next(files.key), files.key);
    commitRename(next(files.cert), files.cert);
    log.info({ cert: files.cert }, 'finished storing a renewed certificate that a restart interrupted');
  } else if (certNext) {
    commitRename(next(files.cert), files.cert);
    log.info({ cert: files.cert }, 'finished storing a renewed certificate that a restart interrupted');
  } else if (keyNext) {
    unlinkDurable(next(files.key));
    log.warn({ key: files.key }, 'dropped the key of a renewal that did not finish; keeping the certificate in use');
  }
}
