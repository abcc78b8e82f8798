// Output helpers: kubectl-style ages and borderless tables like `oc get`. Tables are laid out
// here rather than by a table library because `get -w` prints later rows under a table printed
// earlier, and both must use the same column widths.
//
// Every cell of every table passes through `shown`, and describe and watch lines take their
// values through `forDisplay`: what a node reports (its reason, version, labels) reaches the
// operator's terminal, and a newline or an escape sequence in it must show as `\n` or `\x1b`,
// not start a forged row, clear the screen or retitle the window. -o json|yaml|jsonpath print
// values exactly; they are for programs.

import { escapeControlCharacters } from '../machineconfig/control-characters.ts';

/** A value as one piece of a line: controls, newlines included, as visible escapes. */
export function shown(value: string | number): string {
  return escapeControlCharacters(String(value));
}

/**
 * A copy of what the server sent with every string in it (object keys too, such as label keys)
 * passed through `shown`: for text put together from many fields, where missing one is easy.
 */
export function forDisplay<T>(value: T): T {
  if (typeof value === 'string') return shown(value) as T;
  if (Array.isArray(value)) return value.map(forDisplay) as T;
  if (value && typeof value === 'object' && !Buffer.isBuffer(value)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [shown(k), forDisplay(v)])) as T;
  }
  return value;
}

/** kubectl's HumanDuration: 45s, 5m10s, 2h, 3d4h, 40d, 2y. */
export function age(sinceUnixMs: number, now = Date.now()): string {
  if (!sinceUnixMs) return '<unknown>';
  const s = Math.max(0, Math.floor((now - sinceUnixMs) / 1000));
  const m = Math.floor(s / 60);
  const h = Math.floor(m / 60);
  const d = Math.floor(h / 24);
  if (s < 120) return `${s}s`;
  if (m < 10) return s % 60 ? `${m}m${s % 60}s` : `${m}m`;
  if (h < 3) return `${m}m`;
  if (h < 8) return m % 60 ? `${h}h${m % 60}m` : `${h}h`;
  if (h < 48) return `${h}h`;
  if (d < 8) return h % 24 ? `${d}d${h % 24}h` : `${d}d`;
  if (d < 730) return `${d}d`;
  return `${Math.floor(d / 365)}y`;
}

const GAP = '   ';

/** The width of each column: its widest cell, header included. */
export function columnWidths(head: string[], rows: (string | number)[][]): number[] {
  const widths = head.map((h) => h.length);
  for (const row of rows) row.forEach((cell, i) => { widths[i] = Math.max(widths[i] ?? 0, shown(cell).length); });
  return widths;
}

/** One table line; a cell wider than its column pushes the rest right rather than being cut. */
export function formatRow(cells: (string | number)[], widths: number[]): string {
  return cells.map((cell, i) => shown(cell).padEnd(widths[i] ?? 0)).join(GAP).trimEnd();
}

export function table(head: string[], rows: (string | number)[][], options: { headers?: boolean } = {}): string {
  const widths = columnWidths(head, rows);
  const lines = rows.map((row) => formatRow(row, widths));
  if (options.headers !== false) lines.unshift(formatRow(head, widths));
  return lines.length ? lines.join('\n') + '\n' : '';
}
