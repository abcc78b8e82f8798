// The dashboard's page, kept as a TypeScript string so that it travels inside the esbuild
// bundle (and so the RPM) with no file to find at run time. {{TOKEN}} is replaced per start:
// the script and style are fetched with the same token as the page.

export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mcplane rollout</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/dashboard.css?token={{TOKEN}}">
<script defer src="/dashboard.js?token={{TOKEN}}"></script>
</head>
<body>
<header>
  <h1>mcplane <span class="subtitle">rollout</span></h1>
  <span id="control-plane" class="control-plane"></span>
  <div id="connection" class="connection connecting" role="status" aria-live="polite">Connecting to mcctl dashboard…</div>
</header>
<main>
  <section aria-labelledby="pools-title">
    <h2 id="pools-title">Pools</h2>
    <table id="pools" class="pools">
      <thead><tr><th>Pool</th><th class="progress-col">Progress (nodes by state)</th><th>Updated</th><th>Target config</th><th>Conditions</th></tr></thead>
      <tbody></tbody>
    </table>
    <p class="legend" id="legend"></p>
  </section>
  <section aria-labelledby="nodes-title">
    <div class="toolbar">
      <h2 id="nodes-title">Nodes <span id="node-count" class="count"></span></h2>
      <input id="filter" type="search" placeholder="Filter: name, pool, state, phase, reason" aria-label="Filter nodes">
      <label><input id="not-updated" type="checkbox"> only nodes not updated</label>
    </div>
    <table id="nodes" class="nodes">
      <thead><tr><th>Node</th><th>Pool</th><th>State</th><th>Phase</th><th>In phase</th><th>Reason (click a row for details)</th></tr></thead>
      <tbody></tbody>
    </table>
    <p id="empty" class="empty" hidden>No nodes yet.</p>
  </section>
</main>
</body>
</html>
`;
