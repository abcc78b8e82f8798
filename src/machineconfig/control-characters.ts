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

// What a terminal acts on rather than shows: the C0 controls (newline, carriage return, tab,
// ESC that starts CSI and OSC sequences, BEL that ends OSC), DEL and the C1 controls (U+009B is
// a one-character CSI to some terminals); and the Unicode format characters that make text read
// differently from how it is stored (line and paragraph separators, bidirectional embeddings,
// overrides and isolates, as in "Trojan Source").
const SHOWN_ESCAPED = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const SHOWN_ESCAPED_BUT_LAYOUT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function visible(ch: string): string {
  const named = NAMED[ch];
  if (named) return named;
  const code = ch.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * Text from elsewhere (a node's report, a server's answer) as it may be written to a terminal:
 * every control and format character above becomes a visible escape (`\n`, `\x1b`, `\x9b`,
 * `\u202e`), so it can neither forge a line, move the cursor, clear the screen nor retitle the
 * window. Everything else, backslashes included, is left as it is: the result is for people, not
 * for parsing back. `multiline` leaves line feeds and tabs alone, for messages laid out on
 * several lines (an error that quotes a line of a file keeps its tabs, so its caret lines up);
 * neither can move the cursor up or rewrite what is on the screen.
 * The result holds no such character, so escaping it again changes nothing.
 */
export function escapeControlCharacters(text: string, options: { multiline?: boolean } = {}): string {
  return text.replace(options.multiline ? SHOWN_ESCAPED_BUT_LAYOUT : SHOWN_ESCAPED, visible);
}
