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

/** resource.ParseQuantity for the sizes these fields take; undefined when it is not a quantity. */
export function parseQuantity(raw: string | number): Quantity | undefined {
  const text = String(raw).trim();
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$/.exec(text);
  if (!m) return undefined;
  const number = Number(m[1]);
  const suffix = m[2] ?? '';
  const binary = suffix in BINARY;
  const multiplier = binary ? BINARY[suffix]! : suffix in DECIMAL ? DECIMAL[suffix]! : 10 ** Number(suffix.slice(1));
  const value = Math.ceil(number * multiplier);
  // Canonical form: the largest suffix of the same family that divides the value exactly.
  let canonical = String(value);
  const family = binary ? Object.entries(BINARY) : Object.entries(DECIMAL).filter(([, v]) => v >= 1e3);
  if (value !== 0) {
    for (const [s, v] of family) if (Number.isInteger(value / v)) canonical = `${value / v}${s}`;
  }
  return { value, text: canonical };
}

