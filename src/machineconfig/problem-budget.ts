// How many problems fit in one gRPC status. Trailers are HTTP/2 headers: grpc-js (nghttp2) drops
// the whole stream ("Protocol error") when one header field passes about 64 KiB after HPACK or the
// header block needs more than 8 CONTINUATION frames, and gRPC C-core clients (Python, Ruby, C++)
// refuse metadata above 8 KiB by default. 200 problems were already 67 KB of base64. So a status
// carries the first problems that fit a budget well under 8 KiB, and the total beside them.

import type { Problem } from './errors.ts';

/** Bytes of problem JSON in the trailer (base64 on the wire: 4/3 of this). */
export const PROBLEMS_TRAILER_BUDGET = 4 * 1024;
/** Bytes of the status message after grpc-js percent-encodes it. */
export const STATUS_DETAILS_BUDGET = 1536;
/** No single problem's text may crowd out the others. */
const MAX_PROBLEM_TEXT = 400;

export interface BoundedProblems {
  /** The first problems, each cut to a readable length, whose JSON fits the budget. */
  problems: Problem[];
  /** How many there were in all. */
  total: number;
  json: string;
}

export function boundProblems(all: readonly Problem[], budget = PROBLEMS_TRAILER_BUDGET): BoundedProblems {
  const out: Problem[] = [];
  let bytes = 2; // "[]"
  for (const p of all) {
    const cut = cutProblem(p);
    const size = Buffer.byteLength(JSON.stringify(cut)) + (out.length ? 1 : 0);
    if (bytes + size > budget) break;
    out.push(cut);
    bytes += size;
  }
  return { problems: out, total: all.length, json: JSON.stringify(out) };
}

function cutProblem(p: Problem): Problem {
  const out: Problem = { object: cutText(p.object), field: cutText(p.field), rule: cutText(p.rule, 100), message: cutText(p.message) };
  if (p.source !== undefined) out.source = cutText(p.source);
  return out;
}

export function cutText(text: string, max = MAX_PROBLEM_TEXT): string {
  return text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters)` : text;
}

/**
 * Cuts a status message to `budget` bytes as grpc-js sends it (encodeURI: three bytes for a
 * space, a quote, a newline or any non-ASCII byte), at a line end when there is one, and says
 * how much was left out. Lone surrogates (possible in JSON input) become U+FFFD: encodeURI throws
 * on them, inside grpc-js, where nothing would catch it.
 */
export function boundDetails(raw: string, budget = STATUS_DETAILS_BUDGET): string {
  const details = raw.replace(/\p{Cs}/gu, '\uFFFD');
  if (encodeURI(details).length <= budget) return details;
  const room = budget - 120; // for the marker
  let end = 0;
  let used = 0;
  for (const ch of details) {
    const size = encodeURI(ch).length;
    if (used + size > room) break;
    used += size;
    end += ch.length;
  }
  const lineEnd = details.lastIndexOf('\n', end);
  if (lineEnd > room / 2) end = lineEnd;
  const restLines = details.slice(end).split('\n').filter((l) => l !== '').length;
  return `${details.slice(0, end)}\n… cut here: ${details.length - end} more characters${restLines > 1 ? ` in ${restLines} lines` : ''}`;
}
