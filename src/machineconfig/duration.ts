// The one duration syntax of mcplane's spec fields (soak, health check timeout, maintenance
// window length): Go's units as Kubernetes users write them, plus days for windows.

const DURATION = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;
/** The most milliseconds a Date can be from the epoch (ECMA-262 TimeClip). */
const MAX_DATE_MS = 8.64e15;

/** Milliseconds in "90s", "10m", "1h30m", "1d"; undefined when the text is not that shape. */
export function durationMs(text: string): number | undefined {
  const m = DURATION.exec(text);
  if (!m || text === '') return undefined;
  const ms = (((Number(m[1] ?? 0) * 24 + Number(m[2] ?? 0)) * 60 + Number(m[3] ?? 0)) * 60 + Number(m[4] ?? 0)) * 1000;
  // "99999999999999999999d" is digits, not time: nothing past what a Date can hold is a duration.
  return ms <= MAX_DATE_MS ? ms : undefined;
}
