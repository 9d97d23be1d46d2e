// The fleet page (design §4.8): GET /api/v1/fleet/ drawn as charts (uPlot, vendored under
// static/vendor/uplot, a global loaded from its own file before this module) with a table beside each,
// and every figure a link to the jobs behind it. The window and scope live in the URL.
import { api, bootstrap, debounce, h } from "./util.js";

const boot = bootstrap();
const form = document.getElementById("fleet-filters");
const FILTERS = ["window_days", "cluster", "namespace", "checkpoint_period_s"];
const KIND_COLORS = { uce: "#b3261e", hccl: "#0b57d0", node: "#c26a00", normal: "#146c2e" };
const COMPONENTS = ["detection", "decision", "recovery", "rollback"];
const charts = {};
let body = null;

const num = (value, digits = 1) => (value === null || value === undefined ? "—" : Number(value).toLocaleString(undefined, { maximumFractionDigits: digits, minimumFractionDigits: digits }));
const pct = (ratio) => (ratio === null || ratio === undefined ? "—" : `${(ratio * 100).toFixed(2)} %`);
const secs = (s) => (s < 120 ? `${num(s, 1)} s` : `${num(s / 60, 1)} min`);
const link = (href, text, label) => h("a", { href, "aria-label": label || null }, text);
const cssVar = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";

function scopeName(row) {
  return row.namespace ? `${row.cluster} / ${row.namespace}` : row.cluster ? row.cluster : "All jobs you may see";
}

function params() {
  const query = new URLSearchParams();
  for (const name of FILTERS) {
    const value = form.elements[name].value.trim();
    if (value && !(name === "window_days" && value === "7")) query.set(name, value);
  }
  return query;
}

// --- totals -----------------------------------------------------------------------------------------
function totals(total) {
  const lost = total.npu_hours_lost;
  const stat = (label, value, href, id) => h("li", { class: "card", id }, h("span", { class: "hint" }, label), h("strong", {}, link(href, value, `${label}: ${value}, show the jobs`)));
  document.getElementById("fleet-totals").replaceChildren(
    stat("NPU-hours scheduled", num(total.npu_hours_scheduled), total.jobs_url, "stat-scheduled"),
    stat("NPU-hours lost to faults", num(lost.total, 2), total.jobs_url, "stat-lost"),
    stat("Effective training time", pct(total.effective_training_ratio), total.jobs_url, "stat-ratio"),
    stat("Faults", String(total.faults.total), total.jobs_url, "stat-faults"),
  );
}

// --- charts -----------------------------------------------------------------------------------------
/** Stacked bars over categories (days, namespaces): each layer drawn from zero to the running sum,
 * the tallest first, so the layers below show through. The legend names the layers (no live values:
 * the table below has the exact figures). A click opens the jobs behind the bar under the cursor. */
function stackedBars(id, labels, layers, yLabel, hrefAt) {
  const box = document.getElementById(id);
  if (charts[id]) charts[id].destroy();
  box.replaceChildren();
  const stacked = [];
  let running = labels.map(() => 0);
  for (const layer of layers) {
    running = running.map((sum, i) => sum + (layer.values[i] || 0));
    stacked.push({ ...layer, values: running });
  }
  stacked.reverse();
  const bars = window.uPlot.paths.bars({ size: [0.7, 60] });
  const axis = { stroke: cssVar("--fg-muted"), grid: { stroke: cssVar("--border"), width: 1 }, ticks: { stroke: cssVar("--border") } };
  const opts = {
    width: Math.max(320, box.clientWidth || 640),
    height: 240,
    legend: { live: false },
    scales: { x: { time: false, range: [-0.5, Math.max(0.5, labels.length - 0.5)] }, y: { range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)] } },
    axes: [
      { ...axis, space: 48, values: (u, ticks) => ticks.map((t) => (Number.isInteger(t) && labels[t] !== undefined ? labels[t] : "")) },
      { ...axis, label: yLabel },
    ],
    series: [{}, ...stacked.map((s) => ({ label: s.label, fill: s.color, stroke: s.color, paths: bars, points: { show: false } }))],
  };
  const chart = new window.uPlot(opts, [labels.map((_, i) => i), ...stacked.map((s) => s.values)], box);
  chart.over.addEventListener("click", () => {
    const idx = chart.cursor.idx;
    const href = idx === null || idx === undefined ? null : hrefAt(idx);
    if (href) location.assign(href);
  });
  chart.over.style.cursor = "pointer";
  charts[id] = chart;
  box.dataset.drawn = "true";
}

function faultsChart(total) {
  const buckets = total.faults.buckets;
  const kinds = Object.keys(total.faults.by_kind);
  document.getElementById("chart-faults").setAttribute("aria-label", `Faults per day by kind, ${total.faults.total} in the window; the table below lists them`);
  stackedBars("chart-faults", buckets.map((b) => b.start.slice(5)),
    kinds.map((kind) => ({ label: kind, color: KIND_COLORS[kind] || "#666", values: buckets.map((b) => b.by_kind[kind] || 0) })),
    "faults", () => total.jobs_url);

  const table = document.getElementById("table-faults");
  table.tHead.replaceChildren(h("tr", {}, h("th", { scope: "col" }, "Day (UTC)"), h("th", { scope: "col" }, "All"), ...kinds.map((k) => h("th", { scope: "col" }, k))));
  table.tBodies[0].replaceChildren(...buckets.map((b) => h("tr", {},
    h("th", { scope: "row" }, b.start),
    h("td", {}, b.total ? link(total.jobs_url, String(b.total), `${b.total} faults on ${b.start}, show the jobs`) : "0"),
    ...kinds.map((k) => h("td", {}, String(b.by_kind[k] || 0))))));
}

function lostChart(rows) {
  document.getElementById("chart-lost").setAttribute("aria-label", `NPU-hours lost per namespace in ${rows.length} namespaces, by component; the table below lists them`);
  const colors = { detection: "--bar-detect", decision: "--bar-decide", recovery: "--bar-recover", rollback: "--err" };
  stackedBars("chart-lost", rows.map(scopeName),
    COMPONENTS.map((c) => ({ label: c, color: cssVar(colors[c]), values: rows.map((r) => r.npu_hours_lost[c]) })),
    "NPU-hours", (i) => rows[i] && rows[i].jobs_url);
}

function scopeRow(row, cls) {
  const lost = row.npu_hours_lost;
  const label = scopeName(row);
  return h("tr", { class: cls, dataset: { scope: label } },
    h("th", { scope: "row" }, link(row.jobs_url, label, `${label}: show the jobs`)),
    h("td", {}, num(row.npu_hours_scheduled)),
    h("td", {}, link(row.jobs_url, num(lost.total, 2), `${num(lost.total, 2)} NPU-hours lost in ${label}, show the jobs`)),
    ...COMPONENTS.map((c) => h("td", {}, num(lost[c], 2))),
    h("td", {}, pct(row.effective_training_ratio)),
    h("td", {}, String(row.faults.total)));
}

function lostTable(data) {
  const rows = [scopeRow(data.total, "total")];
  for (const cluster of data.clusters) {
    rows.push(scopeRow(cluster, "cluster"));
    for (const ns of data.namespaces.filter((n) => n.cluster_id === cluster.cluster_id)) rows.push(scopeRow(ns, "namespace"));
  }
  document.querySelector("#table-lost tbody").replaceChildren(...rows);
}

function mttrTable(total) {
  const entries = Object.entries(total.mttr_seconds);
  document.querySelector("#table-mttr tbody").replaceChildren(...(entries.length ? entries.map(([strategy, m]) => h("tr", {},
    h("th", { scope: "row" }, strategy), h("td", {}, secs(m.median)), h("td", {}, secs(m.p90)),
    h("td", {}, link(total.jobs_url, String(m.samples), `${m.samples} incidents ended by ${strategy}, show the jobs`))))
    : [h("tr", {}, h("td", { colspan: 4, class: "empty" }, "No recovery in the window."))]));
}

function recoveriesTable(total) {
  const outcomes = ["recovered", "rescheduled", "failed"];
  const rows = Object.entries(total.recoveries.by_strategy).map(([strategy, counts]) => h("tr", {},
    h("th", { scope: "row" }, strategy), ...outcomes.map((o) => h("td", {}, counts[o] ? link(total.jobs_url, String(counts[o])) : "0"))));
  rows.push(h("tr", { class: "total" }, h("th", { scope: "row" }, "all"), ...outcomes.map((o) => h("td", {}, String(total.recoveries.by_outcome[o] || 0)))));
  document.querySelector("#table-recoveries tbody").replaceChildren(...rows);
}

function topTable(top) {
  document.querySelector("#table-top tbody").replaceChildren(...(top.length ? top.map((job) => h("tr", { dataset: { job: job.job } },
    h("th", { scope: "row" }, link(job.url, job.name), job.deleted ? h("span", { class: "hint" }, " (deleted)") : null),
    h("td", {}, `${job.cluster} / ${job.namespace}`),
    h("td", {}, String(job.faults)),
    h("td", {}, link(job.url, num(job.npu_hours_lost, 2), `${job.name}: ${num(job.npu_hours_lost, 2)} NPU-hours lost, open the job`)),
    h("td", {}, num(job.npu_hours_lost_rollback, 2)),
    h("td", {}, job.could_save === null ? h("span", { class: "hint" }, "not priced yet") : link(job.advice_url, job.could_save >= 1e11 ? "the job fails now" : num(job.could_save, 1)))))
    : [h("tr", {}, h("td", { colspan: 6, class: "empty" }, "No job lost NPU time to faults in the window."))]));
}

function modelBox(model) {
  document.getElementById("fleet-model-text").textContent = model.description;
  document.querySelector("#fleet-assumptions tbody").replaceChildren(...model.assumptions.map((a) => h("tr", { dataset: { name: a.name } },
    h("th", { scope: "row" }, a.name), h("td", {}, `${a.value} ${a.unit || ""}`), h("td", {}, a.source), h("td", { class: "hint" }, a.note))));
}

function render(data) {
  body = data;
  const w = data.window;
  document.getElementById("fleet-window").textContent = `${w.start} – ${w.end} (UTC), ${w.days} day${w.days === 1 ? "" : "s"}`;
  totals(data.total);
  faultsChart(data.total);
  lostChart(data.namespaces);
  lostTable(data);
  mttrTable(data.total);
  recoveriesTable(data.total);
  topTable(data.top_jobs);
  modelBox(data.model);
}

async function load() {
  const query = params();
  history.replaceState(null, "", query.toString() ? `?${query}` : location.pathname);
  const error = document.getElementById("fleet-error");
  try {
    const { data } = await api("GET", `/api/v1/fleet/${query.toString() ? `?${query}` : ""}`);
    error.hidden = true;
    render(data);
  } catch (e) {
    error.textContent = e.message;
    error.hidden = false;
  }
  document.body.dataset.ready = "true";
}

const select = document.getElementById("f-cluster");
for (const name of boot.clusters || []) select.append(h("option", { value: name }, name));
const start = new URLSearchParams(location.search);
for (const name of FILTERS) if (start.has(name)) form.elements[name].value = start.get(name);
const reload = debounce(load, 300);
form.addEventListener("change", reload);
form.addEventListener("input", reload);
form.addEventListener("submit", (e) => { e.preventDefault(); reload.flush(); });
window.addEventListener("resize", debounce(() => body && render(body), 200));
load();
