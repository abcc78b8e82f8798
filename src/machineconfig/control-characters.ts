// Names and paths end up in file names on the host, in systemd's unit table, in log lines and in
// the terminal of whoever runs mcctl. A newline there forges a log line or a second problem line,
// a NUL cuts a path short in every C API below Node, and an escape sequence rewrites a terminal;
// so they are refused where they enter, and quoted wherever they are shown.

// C0 controls, DEL and the C1 controls (which some terminals also act on).
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Why `value` is unacceptable as a name, or undefined when it has no control character. */
export function controlCharacterViolation(value: string): string | undefined {
  const m = CONTROL.exec(value);
  if (!m) return undefined;
  const code = m[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
  return `contains the control character U+${code} at offset ${m.index}; names and paths may not contain ` +
    'control characters (NUL, newline, tab, escape, DEL and the rest of U+0000-U+001F, U+007F-U+009F)';
}

/** A value as it may be shown in a message: JSON-quoted (so controls show as escapes) and cut. */
export function quote(value: string, max = 200): string {
  const quoted = value.length > max ? JSON.stringify(value.slice(0, max)).slice(0, -1) + `…" (${value.length} characters)` : JSON.stringify(value);
  // JSON.stringify escapes C0 only; DEL and C1 need it as much.
  return quoted.replace(/[\u007f-\u009f]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
