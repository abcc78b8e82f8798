// The dashboard's stylesheet (see dashboard-page.ts for why it is a string). Compact on
// purpose: 500 nodes must stay readable on a laptop screen, so rows are one line high and long
// reasons are cut with an ellipsis (the full text is one click away, in the details row).

export const DASHBOARD_STYLE = String.raw`
:root {
  --updated: #2e7d32; --updating: #1565c0; --degraded: #c62828; --waiting: #9e9e9e; --disconnected: #6d4c41;
  --bg: #fafafa; --fg: #212121; --muted: #616161; --line: #e0e0e0;
  font: 13px/1.35 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); }
header { display: flex; align-items: center; gap: 16px; padding: 8px 16px; background: #263238; color: #fff; position: sticky; top: 0; z-index: 2; }
h1 { font-size: 16px; margin: 0; }
h1 .subtitle { font-weight: normal; opacity: .7; }
.control-plane { opacity: .8; font-family: ui-monospace, monospace; }
.connection { margin-left: auto; padding: 2px 10px; border-radius: 10px; font-weight: 600; }
.connection.live { background: #2e7d32; }
.connection.connecting, .connection.reconnecting { background: #ef6c00; }
.connection.failed, .connection.lost { background: #c62828; }
main { padding: 8px 16px 32px; }
h2 { font-size: 14px; margin: 12px 0 6px; }
.count { font-weight: normal; color: var(--muted); }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: 2px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { background: #eceff1; font-weight: 600; position: sticky; top: 37px; z-index: 1; }
.pools td { padding: 5px 8px; vertical-align: middle; }
.progress-col { width: 30%; }
.bar { display: flex; height: 14px; border-radius: 3px; overflow: hidden; background: #eee; min-width: 200px; }
.bar span { display: block; height: 100%; }
.seg-updated { background: var(--updated); }
.seg-updating { background: var(--updating); }
.seg-degraded { background: repeating-linear-gradient(45deg, var(--degraded) 0 4px, #e57373 4px 8px); }
.seg-waiting { background: var(--waiting); }
.seg-disconnected { background: var(--disconnected); }
.bar-counts { margin-top: 2px; color: var(--muted); font-size: 12px; }
.bar-counts .c { margin-right: 10px; }
.bar-counts .c-degraded { color: var(--degraded); font-weight: 700; }
.pools td.alerts { color: var(--degraded); max-width: 0; width: 35%; }
/* One line per condition: the node table below has every reason in full. */
.alerts .alert { overflow: hidden; text-overflow: ellipsis; }
.legend { color: var(--muted); font-size: 12px; margin: 4px 0 0; }
.legend .swatch { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; vertical-align: -1px; }
.paused { margin-left: 6px; padding: 0 5px; border-radius: 3px; background: #fff3e0; color: #e65100; font-size: 11px; }
.mono { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 12px; }
.toolbar { display: flex; align-items: center; gap: 16px; }
.toolbar input[type=search] { width: 320px; padding: 3px 6px; }
/* Fixed layout: the widths do not depend on the content, so the ticking "in phase" column and
   each update re-lay out one row, not 500. */
.nodes { table-layout: fixed; }
.nodes th:nth-child(1) { width: 15%; }
.nodes th:nth-child(2) { width: 8%; }
.nodes th:nth-child(3) { width: 11%; }
.nodes th:nth-child(4) { width: 12%; }
.nodes th:nth-child(5) { width: 7%; }
.nodes td { overflow: hidden; text-overflow: ellipsis; }
.nodes tr.node { cursor: pointer; }
.nodes tr.node:hover { background: #f5f5f5; }
.nodes button.toggle { border: 0; background: none; cursor: pointer; padding: 0 4px 0 0; font-size: 11px; color: var(--muted); }
.badge { display: inline-block; min-width: 92px; padding: 0 6px; border-radius: 3px; font-weight: 600; font-size: 12px; }
.badge.b-updated { color: var(--updated); }
.badge.b-updating { color: #fff; background: var(--updating); }
.badge.b-waiting { color: var(--muted); }
.badge.b-disconnected { color: #fff; background: var(--disconnected); }
.badge.b-degraded { color: #fff; background: var(--degraded); }
tr.bucket-degraded { background: #ffebee; }
tr.bucket-degraded td:first-child { box-shadow: inset 4px 0 0 var(--degraded); }
tr.bucket-degraded td.reason { color: var(--degraded); font-weight: 600; }
tr.bucket-disconnected td:first-child { box-shadow: inset 4px 0 0 var(--disconnected); }
tr.details td { background: #fff8e1; white-space: normal; padding: 6px 12px 8px 28px; }
tr.details dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
tr.details dt { color: var(--muted); }
tr.details dd { margin: 0; }
tr.details dd.full-reason { white-space: pre-wrap; word-break: break-word; font-weight: 600; }
.empty { color: var(--muted); }
`;
