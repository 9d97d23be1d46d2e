// Strategy advice panel (issue #18): GET /api/v1/jobs/{id}/advice/ as a bar chart and a ranked table.
// "Use this" fills the policy form through the callback; it never saves or applies anything.
import { api, badge, debounce, h } from "./util.js";

const fmt = (x) => (x === null || x === undefined ? "—" : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

function specText(spec) {
  const parts = [spec.strategies.length ? spec.strategies.join(", ") : "no process strategy"];
  parts.push(spec.fault_scheduling === "off" ? "no Job-level rescheduling" : `fault-scheduling ${spec.fault_scheduling}`);
  if (spec.pod_rescheduling) parts.push("Pod-level rescheduling");
  return parts.join(" · ");
}

export class Advice {
  constructor(boot, fill) {
    this.jobId = boot.job.id;
    this.fill = fill; // (policy spec) => fills the form
    this.status = document.getElementById("advice-status");
    this.params = document.getElementById("advice-params");
    this.seq = 0;
    const soon = debounce(() => this.load(), 400);
    this.params.addEventListener("input", soon);
    this.params.addEventListener("submit", (e) => { e.preventDefault(); this.load(); });
    document.getElementById("advice-refresh").addEventListener("click", () => this.load());
    this.load();
  }

  query() {
    const q = new URLSearchParams();
    for (const input of this.params.elements) if (input.name && input.value.trim()) q.set(input.name, input.value.trim());
    return q.toString();
  }

  async load() {
    const seq = ++this.seq;
    this.status.textContent = "Computing advice…";
    try {
      const query = this.query();
      const { data } = await api("GET", `/api/v1/jobs/${this.jobId}/advice/${query ? `?${query}` : ""}`);
      if (seq !== this.seq) return;
      this.render(data);
    } catch (error) {
      if (seq !== this.seq) return;
      const issue = error.errors && error.errors[0];
      this.status.replaceChildren(h("span", { class: "issue error", role: "alert" }, issue ? issue.message : `Advice failed: ${error.message}`));
    }
  }

  render(data) {
    const current = data.current;
    const hist = data.history;
    this.status.textContent = `${hist.faults} fault${hist.faults === 1 ? "" : "s"} in ${hist.days.toFixed(1)} days on ${data.npus} NPUs; ` +
      `current policy (${current.in_effect.source}${current.in_effect.revision ? ` r${current.in_effect.revision}` : ""}): ` +
      (current.job_fails ? "the job fails on some faults." : `${fmt(current.expected_lost_npu_hours_per_week)} NPU-h/week lost.`);
    this.renderChart(data);
    this.renderTable(data);
    this.renderAssumptions(data.assumptions);
    document.getElementById("advice-panel").dataset.ready = "true";
  }

  renderChart(data) {
    const rows = [{ label: "current", c: data.current, current: true }, ...data.candidates.map((c, i) => ({ label: `#${i + 1}`, c }))];
    const max = Math.max(1e-9, ...rows.map((r) => (r.c.range ? r.c.range[1] : 0)));
    const list = h("ol", { class: "advice-bars", "aria-label": "Expected lost NPU-hours per week, with range" },
      ...rows.map((r) => {
        const v = r.c.expected_lost_npu_hours_per_week;
        const width = v === null ? 100 : (100 * v) / max;
        const lo = r.c.range ? (100 * r.c.range[0]) / max : 0;
        const hi = r.c.range ? (100 * r.c.range[1]) / max : 0;
        return h("li", { class: r.current ? "current" : "" },
          h("span", { class: "advice-bar-label" }, r.label),
          h("span", { class: "advice-bar-track" },
            h("span", { class: `advice-bar${v === null ? " fails" : ""}`, style: `width:${width}%` }),
            r.c.range ? h("span", { class: "advice-range", style: `left:${lo}%;width:${Math.max(0.5, hi - lo)}%` }) : null),
          h("span", { class: "advice-bar-value" }, v === null ? "job fails" : `${fmt(v)} NPU-h/wk`));
      }));
    document.getElementById("advice-chart").replaceChildren(list);
  }

  renderTable(data) {
    const table = h("table", { id: "advice-candidates" },
      h("caption", { class: "visually-hidden" }, "Candidate policies, best first"),
      h("thead", {}, h("tr", {}, ...["#", "Policy", "Lost NPU-h/week (range)", "Saves vs current", "Why", ""].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, ...data.candidates.map((c, i) => h("tr", { dataset: { rank: i + 1 } },
        h("td", {}, String(i + 1)),
        h("td", {}, specText(c.spec), " ", c.same_as_current ? badge("as now", "info") : null,
          c.equivalent_policies > 1 ? h("span", { class: "hint" }, ` (+${c.equivalent_policies - 1} equivalent)`) : null),
        h("td", {}, c.job_fails ? badge("job fails", "err") : `${fmt(c.expected_lost_npu_hours_per_week)} (${fmt(c.range[0])}–${fmt(c.range[1])})`),
        h("td", {}, c.saves_vs_current === null ? "—" : fmt(c.saves_vs_current)),
        h("td", { class: "why" }, c.why),
        h("td", {}, h("button", { type: "button", class: "small advice-use", onclick: () => this.use(c) }, "Use this"))))));
    document.getElementById("advice-table").replaceChildren(table);
  }

  renderAssumptions(list) {
    const table = h("table", {},
      h("thead", {}, h("tr", {}, ...["Assumption", "Value", "Range", "Source", "Note"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, ...list.map((a) => h("tr", { dataset: { name: a.name } },
        h("td", {}, a.name), h("td", {}, `${a.value}${a.unit ? ` ${a.unit}` : ""}`),
        h("td", {}, a.range ? `${a.range[0]}–${a.range[1]}` : "—"),
        h("td", {}, badge(a.source, a.source), a.samples ? ` n=${a.samples}` : "",
          a.reference ? h("div", { class: "hint" }, h("code", {}, a.reference)) : "",
          a.measured_from ? h("div", { class: "hint" }, `measured once ${a.measured_from} incidents`) : ""),
        h("td", { class: "hint" }, a.note)))));
    document.getElementById("advice-assumptions").replaceChildren(table);
  }

  use(candidate) {
    this.fill(candidate.policy);
    this.status.textContent = `The form now holds: ${specText(candidate.spec)}. Review it, then save and apply yourself.`;
    document.getElementById("policy-form").scrollIntoView({ block: "start" });
  }
}
