// resource.Quantity (k8s.io/apimachinery/pkg/api/resource) for the sizes MCO's higher-level configs
// take: a ContainerRuntimeConfig's logSizeMax and overlaySize, a KubeletConfiguration's reserved
// memory. Ported from quantity.go, amount.go, math.go, suffix.go and scale_int.go, because MCO
// writes what Go makes of them, and a file that differs by one character reboots a node:
// - the text is String(): the input itself when ParseQuantity's fast path found it canonical
//   ("+1Gi", "01Gi" and "1." stay as written), else the canonical form ("1024Mi" is "1Gi",
//   "1.5" is "1500m", "1.15Gi" is "1234803097600m", "1e14" is "100e12");
// - the value is Value(): rounded up as Go rounds it, wrapping where Go's int64 wraps.
// test/fixtures/go-quantity/ holds what Go's own code printed for each case the tests check.

/** How a quantity was written, which decides the suffix family of its canonical form. */
type QuantityFormat = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

/** A parsed resource.Quantity. */
export interface Quantity {
  /** String() (and MarshalJSON without its quotes). */
  text: string;
  /** Value() as a number: exact up to 2^53 (8 PiB), which every size these fields take is under. */
  value: number;
  /**
   * IsZero(): not the same as a Value() of 0, which "12E" (past int64) and "-.001Ki" have too.
   * Absent from quantities stored inside a ContainerRuntimeConfig before it was kept.
   */
  zero?: boolean;
}

/** Why ParseQuantity refused a string, in Go's words. */
const QUANTITY_FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const QUANTITY_SUFFIX_ERROR = "unable to parse quantity's suffix";
const QUANTITY_NUMERIC_ERROR = 'unable to parse numeric part of quantity';

/**
 * Refused here though Go takes them, each because Go's own arithmetic gives up there or the
 * value could not reach Go as written: a string so long that BigInt work on it would hold the
 * server for seconds, an exponent near int32's end (Go wraps it, or loops for billions of
 * steps), and an integer past 2^53, which YAML reading may already have rounded.
 */
const MAX_QUANTITY_LENGTH = 1000;
const MAX_EXPONENT = 2 ** 31 - 2 ** 12; // room for 1,000 fraction digits and the canonical form's shifts

/** The amount as Go holds it: unscaled * 10^exponent. */
interface Amount {
  unscaled: bigint;
  exponent: number;
  /** An inf.Dec (the slow path) rather than the fast path's int64Amount: they round differently in Value(). */
  dec: boolean;
  /** An inf.Dec that ParseQuantity rounded: Go holds it at scale 9, which decides its wrapping. */
  scale9?: boolean;
}

/**
 * strings.TrimSpace as UnmarshalJSON applies it to the JSON text: only the spaces Go's
 * encoding/json writes as they are (a tab, a newline or U+2028 is an escape there, and stays).
 */
const GO_JSON_SPACE = /^[ \u0085\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+|[ \u0085\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+$/g;

const INT64_MAX = 2n ** 63n - 1n;
const int64 = (x: bigint): bigint => BigInt.asIntN(64, x);

const DECIMAL_SUFFIXES: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY_SUFFIXES: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const DECIMAL_BY_EXPONENT = new Map(Object.entries(DECIMAL_SUFFIXES).map(([s, e]) => [e, s]));
const BINARY_BY_EXPONENT = new Map(Object.entries(BINARY_SUFFIXES).map(([s, e]) => [e, s]));

/** resource.ParseQuantity after UnmarshalJSON's trim: the quantity, or Go's error message. */
export function parseQuantity(raw: string | number): Quantity | { error: string } {
  if (typeof raw === 'number' && Number.isInteger(raw) && !Number.isSafeInteger(raw)) {
    return { error: `${raw} is past 2^53, where a number may already have been rounded as the YAML was read; write the quantity as a string` };
  }
  const str = String(raw).replace(GO_JSON_SPACE, '');
  if (str.length > MAX_QUANTITY_LENGTH) return { error: `a quantity of ${str.length} characters is refused (at most ${MAX_QUANTITY_LENGTH})` };
  if (str === '') return { error: QUANTITY_FORMAT_ERROR };
  if (str === '0') return { text: '0', value: 0, zero: true };
  const parts = scan(str);
  if ('error' in parts) return parts;
  const { positive, value, num, denom, suffix } = parts;
  const meaning = interpretSuffix(suffix);
  if (!meaning) return { error: QUANTITY_SUFFIX_ERROR };
  const { base, exponent } = meaning;
  if (Math.abs(exponent) > MAX_EXPONENT) return { error: `the exponent ${exponent} is refused: beyond ±${MAX_EXPONENT}, Go's int32 arithmetic wraps it` };
  let format = meaning.format;

  // The fast path: an int64 that holds the number exactly.
  let precision = 0;
  let scale = 0;
  let mantissa = 1n;
  if (format === 'BinarySI') {
    if (exponent >= 0 && denom.length === 0) {
      mantissa = 1n << BigInt(exponent);
      // Go: int32(float32(exponent)*3/10), roughly the decimal digits 2^exponent takes.
      precision = 15 - num.length - Math.trunc((exponent * 3) / 10) - 1;
    } else {
      precision = -1;
    }
  } else {
    scale = exponent;
    precision = 18 - (num.length + denom.length);
  }
  if (precision >= 0) {
    scale -= denom.length;
    if (scale >= -9) {
      const shifted = num + denom;
      const parsed = BigInt(shifted);
      const product = parsed * mantissa;
      if (parsed <= INT64_MAX && product <= INT64_MAX) {
        const amount: Amount = { unscaled: positive ? product : -product, exponent: scale, dec: false };
        // Written canonically already: String() is the input as it came.
        const canonical = format === 'BinarySI'
          ? exponent % 10 === 0 && (parsed & 7n) !== 0n
          : scale % 3 === 0 && !shifted.endsWith('000') && shifted[0] !== '0';
        return quantity(amount, format, canonical ? str : undefined);
      }
    }
  }

  // The slow path: an inf.Dec, rounded up to a billionth and capped. inf's SetString wants a digit.
  if (!/\d/.test(value)) return { error: QUANTITY_NUMERIC_ERROR };
  const [whole, fraction = ''] = value.replace(/^[+-]/, '').split('.');
  let unscaled = BigInt(`${whole || '0'}${fraction}`);
  let exp = -fraction.length;
  if (base === 10) exp += exponent;
  else unscaled <<= BigInt(exponent);
  if (unscaled !== 0n && exp < -9) {
    // Rounded up: anything below a billionth is one. (Computed without 10^drop when the drop
    // is longer than the number: an exponent of -2e9 must not cost a number of 2e9 digits.)
    const drop = -9 - exp;
    if (drop > unscaled.toString().length) {
      unscaled = 1n;
    } else {
      const divisor = 10n ** BigInt(drop);
      unscaled = unscaled / divisor + (unscaled % divisor === 0n ? 0n : 1n);
    }
    exp = -9;
  }
  let scale9 = unscaled !== 0n;
  if (format === 'BinarySI' && compare({ unscaled, exponent: exp }, INT64_MAX) > 0) {
    unscaled = INT64_MAX;
    exp = 0;
    scale9 = false;
  }
  if (format === 'BinarySI' && unscaled !== 0n && compare({ unscaled, exponent: exp }, 1n) < 0) format = 'DecimalSI';
  return quantity({ unscaled: positive ? unscaled : -unscaled, exponent: exp, dec: true, scale9 }, format, undefined);
}

function quantity(amount: Amount, format: QuantityFormat, text: string | undefined): Quantity {
  return { text: text ?? canonical(amount, format), value: Number(valueOf(amount)), zero: amount.unscaled === 0n };
}

/** parseQuantityString: sign, digits, fraction, suffix; Go's format error for anything else. */
function scan(str: string): { positive: boolean; value: string; num: string; denom: string; suffix: string } | { error: string } {
  const m = /^([+-]?)(0*)(\d*)(?:\.(\d*))?/.exec(str)!;
  const positive = m[1] !== '-';
  const num = m[3] || '0';
  const denom = m[4] ?? '';
  const value = m[0];
  const rest = str.slice(value.length);
  if (!/^[eEinumkKMGTP]*[-+]?\d*$/.test(rest)) return { error: QUANTITY_FORMAT_ERROR };
  return { positive, value, num, denom, suffix: rest };
}

function interpretSuffix(suffix: string): { base: number; exponent: number; format: QuantityFormat } | undefined {
  if (suffix in DECIMAL_SUFFIXES) return { base: 10, exponent: DECIMAL_SUFFIXES[suffix]!, format: 'DecimalSI' };
  if (suffix in BINARY_SUFFIXES) return { base: 2, exponent: BINARY_SUFFIXES[suffix]!, format: 'BinarySI' };
  // strconv.ParseInt of what follows the e: a sign and digits that fit in an int64.
  if (suffix.length > 1 && (suffix[0] === 'e' || suffix[0] === 'E') && /^[+-]?\d+$/.test(suffix.slice(1))) {
    const parsed = BigInt(suffix.slice(1));
    if (parsed > INT64_MAX || parsed < -INT64_MAX - 1n) return undefined;
    // Go keeps it in an int32.
    return { base: 10, exponent: Number(BigInt.asIntN(32, parsed)), format: 'DecimalExponent' };
  }
  return undefined;
}

/** The sign of amount - n, for amounts that may carry a fraction. */
function compare(a: { unscaled: bigint; exponent: number }, n: bigint): number {
  const [left, right] = a.exponent >= 0 ? [a.unscaled * 10n ** BigInt(a.exponent), n] : [a.unscaled, n * 10n ** BigInt(-a.exponent)];
  return left < right ? -1 : left > right ? 1 : 0;
}

/** CanonicalizeBytes. */
function canonical(amount: Amount, format: QuantityFormat): string {
  if (amount.unscaled === 0n) return '0';
  let shown = format;
  let whole = 0n;
  if (format === 'BinarySI') {
    if (compare(amount, -1024n) > 0 && compare(amount, 1024n) < 0) {
      shown = 'DecimalSI';
    } else if (amount.exponent < 0 && amount.unscaled % 10n ** BigInt(-amount.exponent) !== 0n) {
      shown = 'DecimalSI'; // not a whole number: no precision lost
    } else {
      whole = amount.exponent >= 0 ? amount.unscaled * 10n ** BigInt(amount.exponent) : amount.unscaled / 10n ** BigInt(-amount.exponent);
    }
  }
  if (shown === 'BinarySI') {
    let times = 0;
    while (whole % 1024n === 0n) {
      whole /= 1024n;
      times++;
    }
    return `${whole}${BINARY_BY_EXPONENT.get(times * 10) ?? ''}`;
  }
  let { unscaled, exponent } = amount;
  while (unscaled % 10n === 0n) {
    unscaled /= 10n;
    exponent++;
  }
  while (exponent % 3 !== 0) {
    unscaled *= 10n;
    exponent--;
  }
  // A decimal exponent outside n..E has no suffix in Go's table, and none is written.
  const suffix = shown === 'DecimalExponent' ? (exponent === 0 ? '' : `e${exponent}`) : DECIMAL_BY_EXPONENT.get(exponent) ?? '';
  return `${unscaled}${suffix}`;
}

/** Value(): ScaledValue(0), with Go's rounding and int64 wrapping for each representation. */
function valueOf({ unscaled, exponent, dec, scale9 }: Amount): bigint {
  if (!dec) return exponent >= 0 ? positiveScaleInt64(unscaled, exponent) : negativeScaleInt64(unscaled, -exponent);
  if (!scale9) return scaledValue(unscaled, -exponent);
  // Go holds the amount as u * 10^k at scale 9 (k = exponent + 9), and scaledValue divides by
  // 10^9. Worked out here without making u * 10^k when k is large: Go's arithmetic is modulo
  // 2^64, and 10^64 is 0 modulo 2^64.
  const k = exponent + 9;
  const wrapped = (e: number): bigint => (e >= 64 ? 0n : int64(unscaled * 10n ** BigInt(e)));
  if (unscaled < 0n || (k < 19 && unscaled * 10n ** BigInt(k) < INT64_MAX)) {
    const u = wrapped(k); // unscaled.Int64()
    return u % NANO !== 0n ? u / NANO + 1n : u / NANO;
  }
  // Positive and past int64: big.Int DivMod, exact when k >= 9.
  if (k >= 9) return wrapped(k - 9);
  const u = unscaled * 10n ** BigInt(k);
  return int64(u / NANO + (u % NANO !== 0n ? 1n : 0n));
}

const NANO = 10n ** 9n;
const MOST_NEGATIVE = -(2n ** 63n);

/** int64MultiplyScale: the wrapped product, and whether it did not overflow. */
function int64MultiplyScale(a: bigint, b: bigint): [bigint, boolean] {
  if (a === 0n || a === 1n) return [a * b, true];
  if (a === MOST_NEGATIVE && b !== 1n) return [0n, false];
  const c = int64(a * b);
  return [c, c / b === a];
}

/** positiveScaleInt64 as AsScaledInt64 uses it: scales 1, 2, 3, 6 and 9 wrap; others give 0. */
function positiveScaleInt64(base: bigint, scale: number): bigint {
  if (scale === 0) return base;
  if ([1, 2, 3, 6, 9].includes(scale)) return int64MultiplyScale(base, 10n ** BigInt(scale))[0];
  if (base === 0n) return 0n; // Go multiplies zero scale times; the answer is known
  let value = base;
  for (let i = 0; i < scale; i++) {
    const [c, ok] = int64MultiplyScale(value, 10n);
    if (!ok) return 0n;
    value = c;
  }
  return value;
}

/** negativeScaleInt64: divided by 10^scale, rounded away from zero. */
function negativeScaleInt64(base: bigint, scale: number): bigint {
  let value = base;
  let fraction = false;
  for (let i = 0; i < scale; i++) {
    if (!fraction && value % 10n !== 0n) fraction = true;
    value /= 10n;
    if (value === 0n) return fraction ? (base > 0n ? 1n : -1n) : 0n;
  }
  return fraction ? (base > 0n ? value + 1n : value - 1n) : value;
}

/** scaledValue(unscaled, scale, 0) for an inf.Dec Go did not round (zero, or capped). */
function scaledValue(unscaled: bigint, dif: number): bigint {
  if (unscaled === 0n) return 0n;
  if (dif === 0) return int64(unscaled);
  if (dif < 0) return -dif >= 64 ? 0n : int64(unscaled * 10n ** BigInt(-dif));
  const divisor = 10n ** BigInt(dif);
  return int64(unscaled / divisor + (unscaled % divisor !== 0n ? 1n : 0n));
}
