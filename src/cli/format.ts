// Output helpers: kubectl-style ages and borderless tables like `oc get`. Tables are laid out
// here rather than by a table library because `get -w` prints later rows under a table printed
// earlier, and both must use the same column widths.

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
  for (const row of rows) row.forEach((cell, i) => { widths[i] = Math.max(widths[i] ?? 0, String(cell).length); });
  return widths;
}

/** One table line; a cell wider than its column pushes the rest right rather than being cut. */
export function formatRow(cells: (string | number)[], widths: number[]): string {
  return cells.map((cell, i) => String(cell).padEnd(widths[i] ?? 0)).join(GAP).trimEnd();
}

export function table(head: string[], rows: (string | number)[][], options: { headers?: boolean } = {}): string {
  const widths = columnWidths(head, rows);
  const lines = rows.map((row) => formatRow(row, widths));
  if (options.headers !== false) lines.unshift(formatRow(head, widths));
  return lines.length ? lines.join('\n') + '\n' : '';
}
