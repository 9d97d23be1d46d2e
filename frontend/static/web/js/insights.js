// The right-hand side of the live view: incidents with their detect → decide → recover bar, the
// restart budget, an inline-SVG chart of restarts and recovery times, and a rank/node fault grid.
import { badge, fmtDateTime, fmtMs, fmtTime, h } from "./util.js";

const SVG = "http://www.w3.org/2000/svg";
const svg = (tag, attrs = {}, text) => {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
};

export function renderIncidents(container, incidents) {
  container.replaceChildren();
  if (!incidents.length) {
    container.append(h("p", { class: "empty" }, "No incidents yet."));
    return;
  }
  for (const incident of [...incidents].reverse().slice(0, 20)) {
    const d = incident.durations_ms || {};
    const parts = [["detect", d.detect], ["decide", d.decide], ["recover", d.recover]];
    const total = parts.reduce((sum, [, ms]) => sum + (ms || 0), 0);
    const bar = h("div", { class: "phase-bar", role: "img",
      "aria-label": parts.map(([name, ms]) => `${name} ${fmtMs(ms)}`).join(", ") },
      ...parts.filter(([, ms]) => ms).map(([name, ms]) =>
        h("span", { class: name, style: `width:${(100 * ms) / total}%`, title: `${name}: ${fmtMs(ms)}` })));
    const tried = (incident.attempts && incident.attempts.length)
      ? incident.attempts.map((a) => `${a.strategy} ${a.outcome ? `(${a.outcome})` : ""}`.trim()).join(" → ")
      : (incident.strategies || []).join(" → ") || "none yet";
    const fault = incident.fault || {};
    const faultText = [].concat(fault.types || fault.fault_type || [], fault.codes || fault.code || []).join(", ");
    container.append(h("article", { class: "incident", "aria-label": `Incident ${incident.number}` },
      h("div", { class: "row" }, h("strong", {}, `#${incident.number}`), badge(incident.outcome, incident.outcome),
        h("span", { class: "hint" }, fmtDateTime(incident.opened_at))),
      h("div", {}, "Strategies tried: ", h("span", { class: "mono" }, tried)),
      faultText ? h("div", { class: "hint" }, `Fault: ${faultText}`) : null,
      (incident.ranks || []).length ? h("div", { class: "hint" }, `Ranks ${incident.ranks.join(", ")}`,
        (incident.nodes || []).length ? ` on ${incident.nodes.join(", ")}` : "") : null,
      bar,
      h("div", { class: "hint" }, `detect ${fmtMs(d.detect)} · `, decideText(incident, d.decide),
        ` · recover ${fmtMs(d.recover)}`)));
  }
}

// A closed incident without a decide time: the cluster never said when the strategy was chosen (real
// ClusterD tells TaskD only, and writes no Kubernetes Event; in platform mode our decider answers, so
// it is known). Said so, instead of a dash that reads as "still deciding".
function decideText(incident, ms) {
  if (ms !== null && ms !== undefined) return `decide ${fmtMs(ms)}`;
  if (!incident.closed_at) return "decide —";
  return h("span", { title: "The cluster did not report when the strategy was chosen: ClusterD tells " +
    "TaskD only. In platform mode the decider's answer gives it." }, "decide not reported");
}

const BUDGET_ROWS = [
  ["backoff_limit", "Reschedules (backoffLimit)"],
  ["fault_retry_times", "Unconditional retries"],
  ["max_restarts", "In-container restarts"],
];

export function renderBudget(container, budget) {
  container.replaceChildren();
  if (!budget) {
    container.append(h("p", { class: "empty" }, "No restarts recorded yet."));
    return;
  }
  for (const [key, label] of BUDGET_ROWS) {
    const row = budget[key] || {};
    const limited = row.limit !== null && row.limit !== undefined && row.limit !== 0;
    const id = `budget-${key}`;
    container.append(
      h("span", { id }, label),
      limited ? h("meter", { min: 0, max: row.limit, value: row.used || 0, low: row.limit * 0.5, high: row.limit * 0.8,
        optimum: 0, "aria-labelledby": id }) : h("span", { class: "hint" }, "unlimited"),
      h("span", {}, limited ? `${row.used || 0} / ${row.limit} used` : `${row.used || 0} used`),
    );
  }
  if (budget.exhausted) container.append(h("p", { class: "issue error", style: "grid-column: 1 / -1" },
    "A restart budget is exhausted: the next fault cannot be absorbed by it."));
}

/** Restarts (cumulative incidents, a step line) and recovery time per incident (dots) over time. */
export function renderChart(container, incidents, restarts = []) {
  container.replaceChildren();
  const points = incidents.filter((i) => i.opened_at).map((i) => {
    const d = i.durations_ms || {};
    const total = (d.detect || 0) + (d.decide || 0) + (d.recover || 0);
    return { t: Date.parse(i.opened_at), ms: i.closed_at ? total : null, outcome: i.outcome, n: i.number };
  });
  // The step line: reschedules from the budget API when there are any, else one step per incident.
  const steps = restarts.length ? restarts.map((r) => ({ t: Date.parse(r.at), total: r.total }))
    : points.map((p, i) => ({ t: p.t, total: i + 1 }));
  if (!points.length && !steps.length) {
    container.append(h("p", { class: "empty" }, "Nothing to chart yet."));
    return;
  }
  const W = 560, H = 180, L = 44, R = 56, T = 12, B = 26;
  const times = [...points.map((p) => p.t), ...steps.map((s) => s.t)];
  const t0 = Math.min(...times), t1 = Math.max(...times, t0 + 1000);
  const maxCount = Math.max(1, ...steps.map((s) => s.total));
  const maxMs = Math.max(1000, ...points.map((p) => p.ms || 0));
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const yMs = (ms) => H - B - (ms / maxMs) * (H - T - B);
  const yCount = (n) => H - B - (n / maxCount) * (H - T - B);
  const chart = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `${points.length} incidents and ${maxCount} restarts since ${fmtDateTime(new Date(t0).toISOString())}; longest recovery ${fmtMs(maxMs)}` });
  chart.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  chart.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  chart.append(svg("text", { x: 2, y: T + 8 }, fmtMs(maxMs)));
  chart.append(svg("text", { x: 2, y: H - B }, "0"));
  chart.append(svg("text", { x: W - R + 4, y: T + 8 }, String(maxCount)));
  chart.append(svg("text", { x: W - R + 4, y: H - B - 12 }, "restarts"));
  chart.append(svg("text", { x: L, y: H - 8 }, fmtTime(new Date(t0).toISOString())));
  chart.append(svg("text", { x: W - R - 50, y: H - 8 }, fmtTime(new Date(t1).toISOString())));
  let path = `M ${x(t0)} ${yCount(0)}`;
  for (const step of steps) path += ` H ${x(step.t)} V ${yCount(step.total)}`;
  path += ` H ${W - R}`;
  chart.append(svg("path", { class: "line", d: path }));
  for (const p of points) {
    if (p.ms === null) continue;
    const dot = svg("circle", { class: `dot ${p.outcome === "failed" ? "failed" : ""}`, cx: x(p.t), cy: yMs(p.ms), r: 4 });
    dot.append(svg("title", {}, `#${p.n}: recovered in ${fmtMs(p.ms)} (${p.outcome})`));
    chart.append(dot);
  }
  container.append(chart, h("p", { class: "hint" }, "Line: restarts so far. Dots: time from fault to recovery per incident."));
}

/** Last fault per rank and per node, from incidents and fault events. Recent ones stand out. */
export function renderFaultGrid(container, incidents, faultEvents) {
  container.replaceChildren();
  const ranks = new Map(), nodes = new Map();
  const note = (map, key, when, open) => {
    const prev = map.get(key);
    if (!prev || prev.when < when) map.set(key, { when, open: open || (prev && prev.open) });
  };
  for (const i of incidents) {
    const when = Date.parse(i.opened_at);
    for (const r of i.ranks || []) note(ranks, String(r), when, !i.closed_at);
    for (const n of i.nodes || []) note(nodes, String(n), when, !i.closed_at);
  }
  for (const e of faultEvents) {
    const when = Date.parse(e.occurred_at), d = e.data || {};
    for (const r of [].concat(d.ranks ?? d.rank ?? [])) note(ranks, String(r), when, false);
    for (const n of [].concat(d.node ?? [], d.nodes ?? [])) note(nodes, String(n), when, false);
  }
  if (!ranks.size && !nodes.size) {
    container.append(h("p", { class: "empty" }, "No faults recorded."));
    return;
  }
  const now = Date.now();
  const cells = (map, label) => h("div", { class: "grid-cells", role: "list", "aria-label": label },
    ...[...map.entries()].sort((a, b) => a[0].localeCompare(b[0], undefined, { numeric: true })).map(([key, v]) =>
      h("span", { role: "listitem", class: v.open || now - v.when < 600000 ? "hot" : now - v.when < 3600000 ? "warm" : "",
        title: `last fault ${fmtDateTime(new Date(v.when).toISOString())}` }, key)));
  if (ranks.size) container.append(h("h3", {}, "Ranks"), cells(ranks, "Ranks with faults"));
  if (nodes.size) container.append(h("h3", {}, "Nodes"), cells(nodes, "Nodes with faults"));
  container.append(h("p", { class: "hint" }, "Red: open or in the last 10 minutes; amber: the last hour."));
}
