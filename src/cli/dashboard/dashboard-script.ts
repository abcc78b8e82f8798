// The dashboard page's script (see dashboard-page.ts for why it is a string). Plain browser
// JavaScript, no framework, no build step. It draws what mcctl sends over server-sent events
// and decides nothing about the rollout itself (dashboard-model.ts does).
//
// Every string that comes from the control plane (node and pool names, reasons, configs) goes
// into the page through textContent or setAttribute, never as markup.

export const DASHBOARD_SCRIPT = String.raw`(function () {
  'use strict';
  var token = new URLSearchParams(location.search).get('token') || '';
  var BUCKETS = ['degraded', 'disconnected', 'updating', 'waiting', 'updated'];
  // Colour is never the only sign: each state has an icon and a word.
  var ICON = { degraded: '\u26a0', disconnected: '\u2300', updating: '\u21bb', waiting: '\u2026', updated: '\u2713' };

  var pools = new Map();      // name -> pool view
  var nodes = new Map();      // name -> node view
  var rows = new Map();       // name -> { row, cells, details }
  var expanded = new Set();   // nodes whose details row is open
  var clockSkewMs = 0;        // browser clock minus mcctl's
  var frame = 0;
  var order = [];

  var poolBody = document.querySelector('#pools tbody');
  var nodeBody = document.querySelector('#nodes tbody');
  var banner = document.getElementById('connection');
  var filterInput = document.getElementById('filter');
  var notUpdated = document.getElementById('not-updated');

  function el(tag, className, text) {
    var e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function duration(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + 's';
    var m = Math.floor(s / 60);
    if (m < 60) return m + 'm ' + String(s % 60).padStart(2, '0') + 's';
    var h = Math.floor(m / 60);
    if (h < 48) return h + 'h ' + String(m % 60).padStart(2, '0') + 'm';
    return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
  }

  function inPhase(n) {
    return (n.phaseSinceExact ? '' : '\u2265 ') + duration(Date.now() - clockSkewMs - n.phaseSinceMs);
  }

  function setConnection(state, message) {
    banner.className = 'connection ' + state;
    banner.textContent = message;
    banner.setAttribute('data-state', state);
  }

  function showControlPlane(c) {
    if (c.state === 'live') setConnection('live', 'Live');
    else if (c.state === 'reconnecting') setConnection('reconnecting', 'Control plane unreachable: ' + c.message + ' (showing the last known state)');
    else setConnection('failed', 'Watch stopped: ' + c.message);
  }

  function phaseText(n) {
    // The server shows a node whose agent has not taken its assignment yet as Working, phase
    // assigned (Done on its old config before that).
    if (n.bucket === 'updating' && (n.state === 'Done' || n.phase === 'assigned')) return 'assigned, not started';
    return n.phase || '-';
  }

  // The badge names the node's place in the rollout; the agent's own state word is kept where
  // it says more (Working, Unreconcilable) and is always in the details row.
  function stateText(n) {
    switch (n.bucket) {
      case 'degraded': return ICON.degraded + ' ' + (n.state || 'Degraded');
      case 'disconnected': return ICON.disconnected + ' Disconnected';
      case 'updating': return ICON.updating + ' ' + (n.state === 'Working' && n.phase !== 'assigned' ? 'Working' : 'Assigned');
      case 'waiting': return ICON.waiting + ' Waiting';
      default: return ICON.updated + ' ' + (n.state || 'Done');
    }
  }

  // ---- nodes table ----

  function rowFor(name) {
    var r = rows.get(name);
    if (r) return r;
    var row = el('tr', 'node');
    row.setAttribute('data-node', name);
    var cells = {
      name: el('td', 'name'), pool: el('td', 'pool'), state: el('td', 'state'),
      phase: el('td', 'phase'), since: el('td', 'since mono'), reason: el('td', 'reason')
    };
    var toggle = el('button', 'toggle', '\u25b8');
    toggle.type = 'button';
    toggle.setAttribute('aria-expanded', 'false');
    toggle.setAttribute('aria-label', 'details of ' + name);
    cells.name.appendChild(toggle);
    cells.name.appendChild(el('span', 'node-name', name));
    cells.badge = el('span', 'badge');
    cells.state.appendChild(cells.badge);
    for (var k of ['name', 'pool', 'state', 'phase', 'since', 'reason']) row.appendChild(cells[k]);
    var details = el('tr', 'details');
    details.setAttribute('data-details-for', name);
    details.hidden = true;
    var td = el('td');
    td.colSpan = 6;
    details.appendChild(td);
    r = { row: row, cells: cells, toggle: toggle, details: details, detailsCell: td };
    rows.set(name, r);
    return r;
  }

  function fillRow(r, n) {
    r.row.className = 'node bucket-' + n.bucket;
    r.row.setAttribute('data-bucket', n.bucket);
    r.row.setAttribute('data-state', n.state);
    r.cells.pool.textContent = n.pool || '(none)';
    r.cells.badge.className = 'badge b-' + n.bucket;
    r.cells.badge.textContent = stateText(n);
    r.cells.badge.title = 'state ' + (n.state || '?') + ', ' + n.bucket;
    r.cells.phase.textContent = phaseText(n);
    r.cells.since.textContent = inPhase(n);
    r.cells.reason.textContent = n.reason;
    r.cells.reason.title = n.reason;
    if (expanded.has(n.name)) fillDetails(r, n);
  }

  function fillDetails(r, n) {
    var dl = el('dl');
    function item(label, value, className) {
      dl.appendChild(el('dt', '', label));
      dl.appendChild(el('dd', className || '', value));
    }
    item('Reason', n.reason || '(none reported)', 'full-reason');
    item('State / phase', n.state + ' / ' + (n.phase || '-') + ' (' + n.bucket + ')');
    item('Current config', n.currentConfig || '(none)', 'mono');
    item('Desired config', n.desiredConfig || '(none)', 'mono');
    item('Connected', n.connected ? 'yes' : 'no' + (n.lastSeenMs ? ' (last seen ' + new Date(n.lastSeenMs).toLocaleString() + ')' : ''));
    if (n.zone) item('Zone', n.zone);
    item('Agent version', n.agentVersion || 'unknown');
    r.detailsCell.replaceChildren(dl);
  }

  function toggleDetails(name) {
    var r = rows.get(name);
    var n = nodes.get(name);
    if (!r || !n) return;
    var open = !expanded.has(name);
    if (open) { expanded.add(name); fillDetails(r, n); } else expanded.delete(name);
    r.details.hidden = !open || r.row.hidden;
    r.toggle.textContent = open ? '\u25be' : '\u25b8';
    r.toggle.setAttribute('aria-expanded', String(open));
  }

  nodeBody.addEventListener('click', function (ev) {
    var row = ev.target.closest('tr.node');
    if (row) toggleDetails(row.getAttribute('data-node'));
  });

  function sortKey(n) { return BUCKETS.indexOf(n.bucket); }

  function matches(n, words) {
    if (notUpdated.checked && n.bucket === 'updated') return false;
    if (!words.length) return true;
    var hay = (n.name + ' ' + n.pool + ' ' + n.state + ' ' + n.phase + ' ' + n.bucket + ' ' + n.reason).toLowerCase();
    return words.every(function (w) { return hay.indexOf(w) >= 0; });
  }

  // Nodes that need attention first (degraded, disconnected, updating, waiting), then updated
  // ones; by pool and name within each.
  function drawNodes() {
    var list = Array.from(nodes.values()).sort(function (a, b) {
      return sortKey(a) - sortKey(b) || (a.pool < b.pool ? -1 : a.pool > b.pool ? 1 : 0) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    });
    var names = list.map(function (n) { return n.name; });
    if (names.join('\n') !== order.join('\n')) {
      var fragment = document.createDocumentFragment();
      for (var n of list) { var r = rowFor(n.name); fragment.appendChild(r.row); fragment.appendChild(r.details); }
      nodeBody.replaceChildren(fragment);
      order = names;
    }
    applyFilter();
  }

  function applyFilter() {
    var words = filterInput.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    for (var n of nodes.values()) {
      var r = rows.get(n.name);
      if (!r) continue;
      var visible = matches(n, words);
      r.row.hidden = !visible;
      r.details.hidden = !visible || !expanded.has(n.name);
      if (visible) shown++;
    }
    var total = nodes.size;
    document.getElementById('node-count').textContent = shown === total ? '(' + total + ')' : '(' + shown + ' of ' + total + ' shown)';
    document.getElementById('empty').hidden = total > 0;
  }
  filterInput.addEventListener('input', applyFilter);
  notUpdated.addEventListener('change', applyFilter);

  // ---- pools table ----

  function drawPools() {
    var fragment = document.createDocumentFragment();
    var names = Array.from(pools.keys()).sort();
    for (var name of names) {
      var p = pools.get(name);
      var tr = el('tr', 'pool');
      tr.setAttribute('data-pool', p.name);
      var nameCell = el('td', 'pool-name');
      nameCell.appendChild(el('strong', '', p.name));
      if (p.paused) nameCell.appendChild(el('span', 'paused', 'paused'));
      tr.appendChild(nameCell);

      var progress = el('td', 'progress');
      var bar = el('div', 'bar');
      bar.setAttribute('role', 'img');
      var total = 0;
      for (var b of BUCKETS) total += p.counts[b];
      var words = [];
      var countLine = el('div', 'bar-counts');
      for (var b2 of ['updated', 'updating', 'degraded', 'waiting', 'disconnected']) {
        var count = p.counts[b2];
        if (!count) continue;
        var seg = el('span', 'seg-' + b2);
        seg.style.width = (100 * count / total) + '%';
        seg.title = count + ' ' + b2;
        bar.appendChild(seg);
        var c = el('span', 'c c-' + b2, (b2 === 'degraded' ? ICON.degraded + ' ' : '') + count + ' ' + b2);
        c.setAttribute('data-bucket', b2);
        c.setAttribute('data-count', String(count));
        countLine.appendChild(c);
        words.push(count + ' ' + b2);
      }
      if (!total) countLine.textContent = 'no nodes';
      bar.setAttribute('aria-label', words.join(', ') || 'no nodes');
      progress.appendChild(bar);
      progress.appendChild(countLine);
      tr.appendChild(progress);

      tr.appendChild(el('td', 'updated-count', p.updatedMachineCount + '/' + p.machineCount));
      tr.appendChild(el('td', 'target mono', p.target || '(not rendered)'));
      var alerts = el('td', 'alerts');
      for (var a of p.alerts) {
        var line = el('div', 'alert', ICON.degraded + ' ' + a.type + ': ' + a.message);
        line.title = a.message;
        alerts.appendChild(line);
      }
      tr.appendChild(alerts);
      fragment.appendChild(tr);
    }
    poolBody.replaceChildren(fragment);
  }

  function drawLegend() {
    var legend = document.getElementById('legend');
    if (legend.childNodes.length) return;
    legend.appendChild(document.createTextNode('Bar:'));
    for (var b of ['updated', 'updating', 'degraded', 'waiting', 'disconnected']) {
      legend.appendChild(el('span', 'swatch seg-' + b));
      legend.appendChild(document.createTextNode(ICON[b] + ' ' + b));
    }
  }

  // ---- updates ----

  var dirtyNodes = new Set();
  var poolsDirty = false;

  function schedule() {
    if (!frame) frame = requestAnimationFrame(draw);
  }

  function draw() {
    frame = 0;
    if (poolsDirty) { drawPools(); poolsDirty = false; }
    for (var name of dirtyNodes) {
      var n = nodes.get(name);
      if (n) fillRow(rowFor(name), n);
    }
    dirtyNodes.clear();
    drawNodes();
    document.body.setAttribute('data-rendered-at', String(Date.now()));
  }

  function putNode(n) {
    nodes.set(n.name, n);
    dirtyNodes.add(n.name);
  }

  function dropNode(name) {
    nodes.delete(name);
    expanded.delete(name);
    var r = rows.get(name);
    if (r) { r.row.remove(); r.details.remove(); rows.delete(name); }
    order = [];
  }

  function onSnapshot(s) {
    clockSkewMs = Date.now() - s.serverNowMs;
    document.getElementById('control-plane').textContent = s.controlPlane;
    showControlPlane(s.connection);
    pools.clear();
    for (var p of s.pools) pools.set(p.name, p);
    var seen = new Set();
    for (var n of s.nodes) { putNode(n); seen.add(n.name); }
    for (var name of Array.from(nodes.keys())) if (!seen.has(name)) dropNode(name);
    poolsDirty = true;
    drawLegend();
    schedule();
  }

  function onUpdate(u) {
    for (var p of u.pools) pools.set(p.name, p);
    for (var name of u.deletedPools) pools.delete(name);
    for (var n of u.nodes) putNode(n);
    for (var gone of u.deletedNodes) dropNode(gone);
    poolsDirty = true;
    schedule();
  }

  var events = new EventSource('/events?token=' + encodeURIComponent(token));
  events.addEventListener('snapshot', function (e) { onSnapshot(JSON.parse(e.data)); });
  events.addEventListener('update', function (e) { onUpdate(JSON.parse(e.data)); });
  events.addEventListener('connection', function (e) { showControlPlane(JSON.parse(e.data)); });
  events.onerror = function () {
    // mcctl dashboard ends after a watch failure it cannot retry (credentials revoked): keep
    // its reason on the banner rather than a vaguer "lost".
    if (banner.getAttribute('data-state') === 'failed') {
      banner.textContent += ' \u2014 mcctl dashboard has stopped.';
      events.close();
      return;
    }
    if (events.readyState === EventSource.CLOSED) {
      setConnection('lost', 'Lost mcctl dashboard: it stopped or refused this page. Start it again and open the URL it prints.');
    } else {
      setConnection('lost', 'Lost the connection to mcctl dashboard; retrying\u2026 (showing the last known state)');
    }
  };

  // Time in phase ticks without any event.
  setInterval(function () {
    for (var n of nodes.values()) {
      var r = rows.get(n.name);
      if (!r || r.row.hidden) continue;
      var text = inPhase(n);
      if (r.cells.since.textContent !== text) r.cells.since.textContent = text;
    }
  }, 1000);
})();
`;
