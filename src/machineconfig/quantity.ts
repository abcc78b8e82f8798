// resource.Quantity for the sizes MCO's higher-level configs take (a ContainerRuntimeConfig's
// logSizeMax and overlaySize, a KubeletConfiguration's reserved memory): the bytes a quantity
// means and the canonical form Kubernetes writes it back in ("1024Mi" is "1Gi").

/** A resource.Quantity: the bytes it means (Value(), rounded up) and its canonical String(). */
export interface Quantity {
  value: number;
  text: string;
}

const BINARY: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL: Record<string, number> = { n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };
const QUANTITY = /^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$/;

/** The quantity's number, suffix, and what it means exactly (before rounding), or undefined. */
function quantityParts(raw: string | number): { exact: number; suffix: string; binary: boolean } | undefined {
  const m = QUANTITY.exec(String(raw).trim());
  if (!m) return undefined;
  const suffix = m[2] ?? '';
  const binary = suffix in BINARY;
  const multiplier = binary ? BINARY[suffix]! : suffix in DECIMAL ? DECIMAL[suffix]! : 10 ** Number(suffix.slice(1));
  return { exact: Number(m[1]) * multiplier, suffix, binary };
}

/** resource.ParseQuantity for the sizes these fields take; undefined when it is not a quantity. */
export function parseQuantity(raw: string | number): Quantity | undefined {
  const parts = quantityParts(raw);
  if (!parts) return undefined;
  const value = Math.ceil(parts.exact);
  // Canonical form: the largest suffix of the same family that divides the value exactly.
  let canonical = String(value);
  const family = parts.binary ? Object.entries(BINARY) : Object.entries(DECIMAL).filter(([, v]) => v >= 1e3);
  if (value !== 0) {
    for (const [s, v] of family) if (Number.isInteger(value / v)) canonical = `${value / v}${s}`;
  }
  return { value, text: canonical };
}

/**
 * The quantity as Kubernetes writes it back, where mcplane writes the same: Go's canonical form
 * for a whole number with an SI or binary suffix ("1024Mi" is "1Gi", "1.5G" is "1500M"). A
 * fraction of one ("500m") or an exponent ("1e3") is kept as written: Go keeps their formats,
 * which parseQuantity's byte count does not. Undefined when `raw` is not a quantity.
 */
export function quantityText(raw: string | number): string | undefined {
  const parts = quantityParts(raw);
  if (!parts) return undefined;
  if (/^[eE]/.test(parts.suffix) || !Number.isInteger(parts.exact)) return String(raw).trim();
  return parseQuantity(raw)!.text;
}
