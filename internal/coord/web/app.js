// The vastfleet dashboard: one EventSource, every string from agents set
// with textContent, never parsed as markup; charts drawn by hand on canvas.
"use strict";

const WINDOW_MS = 10 * 60 * 1000; // charts show the last ten minutes
const series = new Map();         // chart name → [{t, v}]

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
}

function num(v, digits) {
  if (typeof v !== "number" || !isFinite(v)) return "–";
  const a = Math.abs(v);
  const units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [n, u] of units) {
    if (a >= n) return (v / n).toFixed(2) + u;
  }
  return v.toFixed(digits === undefined ? (Number.isInteger(v) ? 0 : 1) : digits);
}

function bytes(v) {
  if (typeof v !== "number" || !isFinite(v)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return v.toFixed(i === 0 ? 0 : 1) + " " + units[i];
}

function ago(iso, now) {
  const t = Date.parse(iso);
  if (!isFinite(t)) return "never";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  return Math.floor(s / 3600) + " h ago";
}

function setText(id, text) {
  const e = $(id);
  if (e && e.textContent !== text) e.textContent = text;
}

// metricTile finds or makes the tile of a custom metric; its value element
// has the stable id metric-<name>.
function metricTile(name) {
  const id = "metric-" + name;
  let v = document.getElementById(id);
  if (v) return v;
  const tile = el("div", "tile");
  tile.appendChild(el("div", "label", name));
  v = el("div", "value", "–");
  v.id = id;
  tile.appendChild(v);
  $("metric-tiles").appendChild(tile);
  return v;
}

function record(name, t, v) {
  let s = series.get(name);
  if (!s) { s = []; series.set(name, s); }
  s.push({ t, v });
  while (s.length && s[0].t < t - WINDOW_MS) s.shift();
}

function chartBox(name) {
  const id = "chart-" + name;
  let box = document.getElementById(id);
  if (box) return box;
  box = el("div", "chart");
  box.id = id;
  const label = el("div", "label");
  label.appendChild(el("span", "", name));
  const cur = el("span", "current", "");
  label.appendChild(cur);
  box.appendChild(label);
  box.appendChild(el("canvas"));
  $("charts").appendChild(box);
  return box;
}

function draw(name, now) {
  const box = chartBox(name);
  const pts = series.get(name) || [];
  const canvas = box.querySelector("canvas");
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 300, h = canvas.clientHeight || 90;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  box.querySelector(".current").textContent = pts.length ? num(pts[pts.length - 1].v) : "";
  if (!pts.length) return;
  let hi = 0;
  for (const p of pts) hi = Math.max(hi, p.v);
  if (hi <= 0) hi = 1;
  const x = (t) => ((t - (now - WINDOW_MS)) / WINDOW_MS) * (w - 2) + 1;
  const y = (v) => h - 4 - (v / hi) * (h - 16);
  ctx.strokeStyle = "#2b333c";
  ctx.beginPath(); ctx.moveTo(0, h - 4.5); ctx.lineTo(w, h - 4.5); ctx.stroke();
  ctx.fillStyle = "#8a949e";
  ctx.font = "10px system-ui, sans-serif";
  ctx.fillText(num(hi), 2, 10);
  ctx.strokeStyle = "#58a6ff";
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  pts.forEach((p, i) => (i ? ctx.lineTo(x(p.t), y(p.v)) : ctx.moveTo(x(p.t), y(p.v))));
  ctx.stroke();
  const last = pts[pts.length - 1];
  ctx.fillStyle = "#58a6ff";
  ctx.beginPath(); ctx.arc(x(last.t), y(last.v), 2.5, 0, 2 * Math.PI); ctx.fill();
}

// probeCell is what the node's boot probe measured against what its
// offer advertised, or that it is probing.
function probeCell(n) {
  const p = n.probe;
  if (!p) return [n.stage === "probe" ? "probing…" : "–", ""];
  if (p.status !== "ok") return ["probe failed", "refused"];
  const a = p.advertised || {};
  const parts = [num(p.cores, 1) + (a.cores ? " / " + num(a.cores, 0) : "") + " cores"];
  if (a.gpus || p.gpus) parts.push(p.gpus + (a.gpus ? " / " + a.gpus : "") + " GPU");
  // Download from the coordinator against the offer's inet_down: shown,
  // not judged (the coordinator's own link bounds it too).
  if (p.download_mbps) parts.push(num(8 * p.download_mbps, 0) + (a.down_mbps ? " / " + num(a.down_mbps, 0) : "") + " Mb/s down");
  const short = (a.cores && p.cores < 0.7 * a.cores) || (a.gpus && p.gpus < 0.7 * a.gpus);
  return [parts.join(" · "), short ? "num refused" : "num"];
}

// deliveryCell is each custom metric per $/hr, with its share of the
// median node's; a node under half the median is marked.
function deliveryCell(n) {
  const per = n.per_dph || {};
  const share = n.per_dph_share || {};
  const names = Object.keys(per).sort();
  if (!names.length) return ["–", "num"];
  let low = false;
  const parts = names.map((k) => {
    const s = share[k];
    if (s !== undefined && s < 0.5) low = true;
    return k + " " + num(per[k]) + (s !== undefined ? " (" + Math.round(100 * s) + "%)" : "");
  });
  return [parts.join(" · "), low ? "num refused" : "num"];
}

// The node table keeps one row per node and rebuilds only the rows whose
// node changed: a delta names them. Every row's "last seen" is redone each
// update, by its text alone.
const nodeData = new Map(); // node name → its latest row from the server
const nodeRows = new Map(); // node name → its <tr>
const AGO_CELL = 6;

function nodeRow(n, now) {
  const tr = el("tr");
  tr.dataset.node = n.node;
  const gpus = n.gpus || [];
  const gpuUse = gpus.length ? gpus.reduce((a, g) => a + g.util_percent, 0) / gpus.length : 0;
  const sessions = (n.sessions || []).map((s) => s.name + ":" + s.state).join(", ");
  const cells = [
    [n.node, ""],
    [n.state, "state-" + n.state],
    probeCell(n),
    [num(n.cpu_percent, 0), "num"],
    [bytes(n.ram_used_bytes) + " / " + bytes(n.ram_total_bytes), "num"],
    [gpus.length ? gpus.length + " × " + num(gpuUse, 0) + " %" : "–", "num"],
    [ago(n.last_seen, now), ""],
    [n.dph ? "$" + n.dph.toFixed(3) : "–", "num"],
    deliveryCell(n),
    [n.refused ? String(n.refused) : "0", n.refused ? "num refused" : "num"],
    [sessions, ""],
  ];
  for (const [text, cls] of cells) tr.appendChild(el("td", cls, text));
  return tr;
}

// renderNodes redoes the rows of the names in changed (all of them when
// changed is null), in name order, and every row's age.
function renderNodes(changed, now) {
  const tbody = $("node-table").tBodies[0];
  if (changed === null) {
    nodeRows.clear();
    const names = [...nodeData.keys()].sort();
    const rows = names.map((name) => {
      const tr = nodeRow(nodeData.get(name), now);
      nodeRows.set(name, tr);
      return tr;
    });
    if (!rows.length) {
      const tr = el("tr");
      const td = el("td", "empty", "no node has reported yet");
      td.colSpan = 11;
      tr.appendChild(td);
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
    return;
  }
  let added = false;
  for (const name of changed) {
    const old = nodeRows.get(name);
    const n = nodeData.get(name);
    if (!n) {
      if (old) old.remove();
      nodeRows.delete(name);
      continue;
    }
    const tr = nodeRow(n, now);
    nodeRows.set(name, tr);
    if (old) {
      old.replaceWith(tr);
    } else {
      tbody.appendChild(tr);
      added = true;
    }
  }
  if (added) {
    const empty = tbody.querySelector("td.empty");
    if (empty) empty.parentElement.remove();
    const names = [...nodeRows.keys()].sort();
    tbody.replaceChildren(...names.map((name) => nodeRows.get(name)));
  }
  for (const [name, tr] of nodeRows) {
    const cell = tr.cells[AGO_CELL];
    const text = ago(nodeData.get(name).last_seen, now);
    if (cell && cell.textContent !== text) cell.textContent = text;
  }
}

function renderFindings(findings) {
  const items = findings.map((f) => {
    const li = el("li");
    li.dataset.key = f.key;
    li.appendChild(el("code", "", typeof f.data === "string" ? f.data : JSON.stringify(f.data)));
    // The coordinator's time of receipt, on the page's one clock; the
    // node's own stamp (a host may skew it) only as a tooltip.
    const when = new Date(f.received_at || f.at);
    const meta = el("div", "meta", [f.node, f.session, isFinite(when) ? when.toLocaleTimeString() : ""].filter(Boolean).join(" · "));
    if (f.received_at && f.at) meta.title = "node's clock: " + new Date(f.at).toLocaleTimeString();
    li.appendChild(meta);
    return li;
  });
  if (!items.length) items.push(el("li", "empty", "no findings yet"));
  $("findings-list").replaceChildren(...items);
}

// render shows one moment: changed names the nodes to redo (null: all).
function render(snap, changed) {
  const now = Date.parse(snap.at) || Date.now();
  const t = snap.totals || {};
  const first = nodeData.values().next().value;
  if (first) setText("fleet-name", first.fleet);
  setText("nodes-alive", String(t.nodes_alive || 0));
  setText("nodes-stale", String(t.nodes_stale || 0));
  setText("nodes-dead", String(t.nodes_dead || 0));
  setText("cpu-percent", num(t.cpu_percent || 0, 0) + " %");
  setText("cpu-cores", num(t.cpu_cores || 0));
  setText("ram-used", bytes(t.ram_used_bytes || 0));
  setText("ram-total", bytes(t.ram_total_bytes || 0));
  setText("gpus", String(t.gpus || 0));
  setText("gpu-util", num(t.gpu_util_avg || 0, 0));
  setText("findings-count", String(t.findings || 0));
  setText("items-done", String(t.items_done || 0));
  setText("items-left", String(t.items_left || 0));
  setText("dph", "$" + (t.dph || 0).toFixed(2));
  setText("spent", (t.spent || 0).toFixed(2));
  const metrics = t.metrics || {};
  for (const name of Object.keys(metrics).sort()) {
    const v = metricTile(name);
    const text = num(metrics[name]);
    if (v.textContent !== text) v.textContent = text;
  }
  record("CPU % (total)", now, t.cpu_percent || 0);
  record("nodes alive", now, t.nodes_alive || 0);
  for (const name of Object.keys(metrics)) record(name, now, metrics[name]);
  for (const name of series.keys()) draw(name, now);
  renderNodes(changed, now);
  renderFindings(snap.findings || []);
  setText("updated", "updated " + new Date(now).toLocaleTimeString() + (snap.clock === "market" ? " market time (simulated)" : " wall time"));
}

function connect() {
  const es = new EventSource("/api/v1/events");
  es.addEventListener("open", () => {
    $("conn").className = "conn up";
    $("conn").textContent = "live";
  });
  es.addEventListener("snapshot", (ev) => {
    try {
      const snap = JSON.parse(ev.data);
      nodeData.clear();
      for (const n of snap.nodes || []) nodeData.set(n.node, n);
      render(snap, null);
    } catch (e) { console.error(e); }
  });
  es.addEventListener("delta", (ev) => {
    try {
      const d = JSON.parse(ev.data);
      const changed = [];
      for (const n of d.nodes || []) { nodeData.set(n.node, n); changed.push(n.node); }
      for (const name of d.removed || []) { nodeData.delete(name); changed.push(name); }
      render(d, changed);
    } catch (e) { console.error(e); }
  });
  es.addEventListener("error", () => {
    // EventSource reconnects by itself; only the badge changes.
    $("conn").className = "conn down";
    $("conn").textContent = "reconnecting…";
  });
}

// Seed the charts with the coordinator's last ten minutes, then go live.
fetch("/api/v1/history", { credentials: "same-origin" })
  .then((r) => (r.ok ? r.json() : []))
  .then((points) => {
    for (const p of points) {
      const t = Date.parse(p.at);
      if (!isFinite(t)) continue;
      record("CPU % (total)", t, p.cpu_percent || 0);
      record("nodes alive", t, p.nodes_alive || 0);
      for (const [name, v] of Object.entries(p.metrics || {})) record(name, t, v);
    }
  })
  .catch(() => {})
  .finally(connect);

// The market's depth curve, when the coordinator draws it; the section
// stays hidden otherwise.
(function depth() {
  const img = $("depth-plot");
  img.addEventListener("load", () => { $("depth").hidden = false; });
  img.src = "/api/v1/depth.svg";
})();
