// Output helpers: kubectl-style ages and borderless tables like `oc get`.

import Table from 'cli-table3';

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

export function table(head: string[], rows: (string | number)[][]): string {
  const t = new Table({
    head,
    chars: {
      top: '', 'top-mid': '', 'top-left': '', 'top-right': '', bottom: '', 'bottom-mid': '', 'bottom-left': '', 'bottom-right': '',
      left: '', 'left-mid': '', mid: '', 'mid-mid': '', right: '', 'right-mid': '', middle: '   ',
    },
    style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0 },
  });
  for (const row of rows) t.push(row.map(String));
  return t.toString().split('\n').map((line) => line.trimEnd()).join('\n') + '\n';
}
