// RFC 2397 data URLs, the only content source a MachineConfig may use: a config must be static,
// so the control plane can hash it and the agent never fetches anything at apply time.

export const CANONICAL_DATA_URL_PREFIX = 'data:;base64,';

export type DataUrlResult = { bytes: Buffer } | { error: string };
/** `tooLarge`: the decoded bytes would exceed the caller's limit; nothing was decoded past it. */
export type BoundedDataUrlResult = DataUrlResult | { tooLarge: true };

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function isValidBase64(text: string): boolean {
  return text.length % 4 === 0 && BASE64.test(text);
}

/** How many bytes valid padded base64 text decodes to, without decoding it. */
export function base64DecodedLength(text: string): number {
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return (text.length / 4) * 3 - padding;
}

export function decodeDataUrl(url: string): DataUrlResult {
  return decodeDataUrlBounded(url, Infinity) as DataUrlResult;
}

/** Decodes at most `maxBytes`: what a user sends is decoded before anyone has checked its size. */
export function decodeDataUrlBounded(url: string, maxBytes: number): BoundedDataUrlResult {
  if (!url.startsWith('data:')) return { error: 'not a data URL (must start with "data:")' };
  const comma = url.indexOf(',');
  if (comma < 0) return { error: 'malformed data URL: no "," between the media type and the data' };
  const params = url.slice(5, comma).split(';');
  const isBase64 = params[params.length - 1]?.toLowerCase() === 'base64';
  const data = url.slice(comma + 1);
  if (isBase64) {
    if (!isValidBase64(data)) return { error: 'malformed data URL: the data is not valid padded base64' };
    if (base64DecodedLength(data) > maxBytes) return { tooLarge: true };
    return { bytes: Buffer.from(data, 'base64') };
  }
  return percentDecode(data, maxBytes);
}

export function encodeDataUrl(bytes: Uint8Array): string {
  return CANONICAL_DATA_URL_PREFIX + Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

/** Decodes %XX escapes into raw bytes; unlike decodeURIComponent it accepts non-UTF-8 bytes. */
function percentDecode(data: string, maxBytes: number): BoundedDataUrlResult {
  if (!data.includes('%')) {
    return Buffer.byteLength(data, 'utf8') > maxBytes ? { tooLarge: true } : { bytes: Buffer.from(data, 'utf8') };
  }
  const out: number[] = [];
  for (let i = 0; i < data.length; i++) {
    if (out.length > maxBytes) return { tooLarge: true };
    const ch = data.charCodeAt(i);
    if (ch === 0x25 /* % */) {
      const hex = data.slice(i + 1, i + 3);
      if (!/^[0-9a-fA-F]{2}$/.test(hex)) {
        return { error: `malformed data URL: bad percent escape "%${hex}" at offset ${i}` };
      }
      out.push(parseInt(hex, 16));
      i += 2;
    } else {
      // Push the character's UTF-8 bytes (handles surrogate pairs via codePointAt).
      const cp = data.codePointAt(i)!;
      const encoded = Buffer.from(String.fromCodePoint(cp), 'utf8');
      for (const b of encoded) out.push(b);
      if (cp > 0xffff) i++;
    }
  }
  return out.length > maxBytes ? { tooLarge: true } : { bytes: Buffer.from(out) };
}
