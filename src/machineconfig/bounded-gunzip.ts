// Decompressing what a user sent, without letting them choose how much memory the server spends:
// a 4 MB gzip stream can expand to gigabytes, so inflation stops at the limit instead of
// finishing first and measuring afterwards.

import { gunzipSync } from 'node:zlib';

export type GunzipResult = { bytes: Buffer } | { tooLarge: true } | { error: string };

export function gunzipBounded(compressed: Buffer, maxBytes: number): GunzipResult {
  try {
    // zlib checks maxOutputLength after every chunk it inflates, so at most one chunk (16 KiB)
    // past the limit is ever held.
    const bytes = gunzipSync(compressed, { maxOutputLength: Math.max(1, maxBytes) });
    return bytes.length > maxBytes ? { tooLarge: true } : { bytes };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') return { tooLarge: true };
    return { error: (err as Error).message };
  }
}
