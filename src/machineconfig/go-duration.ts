// Go's time.Duration as Kubernetes objects carry it (metav1.Duration): parsed by
// time.ParseDuration and written back by Duration.String(). MCO decodes a KubeletConfig into the
// kubelet's typed configuration and encodes it again, so "5m" in a KubeletConfig is "5m0s" in the
// kubelet.conf it writes; mcplane writes the same bytes, or a node would see a change (and a
// reboot) where MCO's would not. Followed: Go's src/time/format.go (ParseDuration, leadingInt,
// leadingFraction) and src/time/time.go (Duration.format, fmtFrac, fmtInt). Nanoseconds are
// BigInts: a Duration is an int64, past what a double holds exactly.

const NS = 1n;
const US = 1000n * NS;
const MS = 1000n * US;
const SECOND = 1000n * MS;
const MINUTE = 60n * SECOND;
const HOUR = 60n * MINUTE;
const MAX_DURATION = (1n << 63n) - 1n;

/** time.unitMap: "µs" is U+00B5 (micro sign), "μs" U+03BC (Greek mu); Go takes both. */
const UNITS: Record<string, bigint> = { ns: NS, us: US, '\u00b5s': US, '\u03bcs': US, ms: MS, s: SECOND, m: MINUTE, h: HOUR };

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';

/** Go's quote() of the duration text in its error messages (printable ASCII here). */
const quote = (s: string): string => JSON.stringify(s);

/**
 * time.ParseDuration: nanoseconds, or Go's error text ("time: invalid duration \"5x\"", "time:
 * missing unit in duration \"5\"", "time: unknown unit \"d\" in duration \"1d\"").
 */
export function parseGoDuration(text: string): { ns: bigint } | { error: string } {
  const invalid = { error: `time: invalid duration ${quote(text)}` };
  let s = text;
  let neg = false;
  if (s !== '' && (s[0] === '-' || s[0] === '+')) {
    neg = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return { ns: 0n };
  if (s === '') return invalid;
  let total = 0n;
  while (s !== '') {
    if (!(s[0] === '.' || isDigit(s[0]))) return invalid;
    // [0-9]*: an integer part past int64 is an error (leadingInt).
    let i = 0;
    let v = 0n;
    while (isDigit(s[i])) {
      v = v * 10n + BigInt(s.charCodeAt(i) - 48);
      if (v > 1n << 63n) return invalid;
      i++;
    }
    const pre = i > 0;
    s = s.slice(i);
    // (\.[0-9]*)?: digits past what int64 holds are consumed and dropped (leadingFraction).
    let f = 0n;
    let scale = 1;
    let post = false;
    if (s[0] === '.') {
      s = s.slice(1);
      let j = 0;
      let overflow = false;
      while (isDigit(s[j])) {
        if (!overflow) {
          const y = f * 10n + BigInt(s.charCodeAt(j) - 48);
          if (y > 1n << 63n) overflow = true;
          else {
            f = y;
            scale *= 10;
          }
        }
        j++;
      }
      post = j > 0;
      s = s.slice(j);
    }
    if (!pre && !post) return invalid;
    let u = 0;
    while (u < s.length && !(s[u] === '.' || isDigit(s[u]))) u++;
    if (u === 0) return { error: `time: missing unit in duration ${quote(text)}` };
    const unitText = s.slice(0, u);
    s = s.slice(u);
    const unit = UNITS[unitText];
    if (unit === undefined) return { error: `time: unknown unit ${quote(unitText)} in duration ${quote(text)}` };
    if (v > (1n << 63n) / unit) return invalid;
    v *= unit;
    if (f > 0n) {
      // float64(f) * (float64(unit) / scale), truncated, as Go computes it.
      v += BigInt(Math.trunc(Number(f) * (Number(unit) / scale)));
      if (v > 1n << 63n) return invalid;
    }
    total += v;
    if (total > 1n << 63n) return invalid;
  }
  if (neg) return { ns: -total };
  if (total > MAX_DURATION) return invalid;
  return { ns: total };
}

/** fmtFrac: v / 10^prec's fraction, trailing zeros and a bare point left out; and v / 10^prec. */
function fracPart(v: bigint, prec: number): { text: string; rest: bigint } {
  let text = '';
  let print = false;
  for (let i = 0; i < prec; i++) {
    const digit = v % 10n;
    print ||= digit !== 0n;
    if (print) text = `${digit}${text}`;
    v /= 10n;
  }
  return { text: print ? `.${text}` : '', rest: v };
}

/** Duration.String(): "0s", "500ns", "1.5µs", "100ms", "1.5s", "5m0s", "1h2m3s". */
export function formatGoDuration(ns: bigint): string {
  const neg = ns < 0n;
  let u = neg ? -ns : ns;
  let out: string;
  if (u < SECOND) {
    if (u === 0n) return '0s';
    const [prec, unit] = u < US ? [0, 'ns'] : u < MS ? [3, '\u00b5s'] : [6, 'ms'];
    const { text, rest } = fracPart(u, prec);
    out = `${rest}${text}${unit}`;
  } else {
    const { text, rest } = fracPart(u, 9);
    u = rest;
    out = `${u % 60n}${text}s`;
    u /= 60n;
    if (u > 0n) {
      out = `${u % 60n}m${out}`;
      u /= 60n;
      if (u > 0n) out = `${u}h${out}`;
    }
  }
  return neg ? `-${out}` : out;
}
