// What-if panel (issues #8, #13): replay faults with POST /policies/simulate/, from the config the job
// runs with and from the draft after a recreation, side by side.
import { api, badge, fmtMs, h, toYaml } from "./util.js";

const OUTCOMES = [
  ["true", "first attempt works"],
  ["false,true", "first fails, next works"],
  ["false,false,true", "two fail, third works"],
  ["false,false,false,false,false,false", "every attempt fails"],
];

export class WhatIf {
  constructor(boot, draft) {
    this.boot = boot;
    this.draft = draft; // () => the policy form's current spec
    this.list = document.getElementById("faults-list");
    this.result = document.getElementById("whatif-result");
    document.getElementById("fault-add").addEventListener("click", () => this.addFault(true));
    document.getElementById("whatif-run").addEventListener("click", () => this.run());
    this.addFault();
  }

  addFault(focus = false) {
    const n = this.list.children.length + 1;
    const id = (name) => `fault-${n}-${name}-${Math.random().toString(36).slice(2, 6)}`;
    const ids = { type: id("type"), ranks: id("ranks"), level: id("level"), attempts: id("attempts") };
    const el = h("div", { class: "rule row", role: "group", "aria-label": `Fault ${n}` },
      h("div", {}, h("label", { for: ids.type }, "Fault type"),
        h("select", { id: ids.type, dataset: { key: "type" } }, ...this.boot.fault_types.map((t) => h("option", { value: t }, t)))),
      h("div", {}, h("label", { for: ids.ranks }, "Ranks (comma-separated)"),
        h("input", { id: ids.ranks, dataset: { key: "ranks" }, value: "1", size: 10 })),
      h("div", {}, h("label", { for: ids.level }, "Level (optional)"),
        h("input", { id: ids.level, dataset: { key: "level" }, size: 14, placeholder: "RestartRequest" })),
      h("div", {}, h("label", { for: ids.attempts }, "Recovery attempts"),
        h("select", { id: ids.attempts, dataset: { key: "attempts" } }, ...OUTCOMES.map(([v, t]) => h("option", { value: v }, t)))),
      h("button", { type: "button", class: "small danger", onclick: () => el.remove() }, "Remove"));
    this.list.append(el);
    if (focus) el.querySelector("select").focus();
  }

  faults() {
    return [...this.list.children].map((el) => {
      const get = (key) => el.querySelector(`[data-key="${key}"]`).value.trim();
      const fault = {
        type: get("type"),
        ranks: get("ranks").split(",").map((s) => s.trim()).filter(Boolean).map(Number),
        attempts: get("attempts").split(",").map((s) => s === "true"),
      };
      if (get("level")) fault.level = get("level");
      return fault;
    });
  }

  async run() {
    this.result.replaceChildren(h("p", { class: "hint" }, "Simulating…"));
    const faults = this.faults();
    const job = this.boot.job.id;
    // Side by side: what the job would do now (the config it was created with, which ClusterD keeps
    // until the job is recreated), and what the draft would do after a recreation.
    const runs = [
      { as: "in-effect", title: "In effect now", body: { job, as: "in-effect", faults } },
      { as: "after-recreation", title: "After recreation, with the draft", body: { job, as: "after-recreation", spec: this.draft(), faults } },
    ];
    const columns = await Promise.all(runs.map(async (run) => {
      try {
        const { data } = await api("POST", "/api/v1/policies/simulate/", run.body);
        return this.column(run, data);
      } catch (error) {
        const message = error.status === 404 ? "The simulator is not available on this server yet." : error.message;
        return h("section", { class: "whatif-column", dataset: { as: run.as } }, h("h3", {}, run.title),
          h("p", { class: "issue error", role: "alert" }, `Simulation failed: ${message}`),
          ...(error.errors || []).filter((e) => e.field).map((e) => h("p", { class: "issue error" }, `${e.field}: ${e.message}`)));
      }
    }));
    this.result.replaceChildren(...columns);
  }

  column(run, data) {
    const start = data.start || {};
    const from = run.as === "in-effect"
      ? `From ${start.revision ? `revision ${start.revision}` : "the observed config"}${start.note ? `: ${start.note}` : ""}`
      : (start.note || "");
    return h("section", { class: "whatif-column", dataset: { as: run.as }, "aria-label": run.title },
      h("h3", {}, run.title), h("p", { class: "hint" }, from), ...this.render(data));
  }

  render(data) {
    const parts = (data.faults || []).map((fault, i) => h("section", { class: "card", "aria-label": `Fault ${i + 1}` },
      h("h3", {}, `Fault ${i + 1}: `, badge(fault.outcome, String(fault.outcome).startsWith("recovered") ? "ok" : String(fault.outcome).includes("fail") ? "err" : "warn"),
        fault.budget_consumed !== undefined ? h("span", { class: "hint" }, ` budget used: ${JSON.stringify(fault.budget_consumed)}`) : null),
      fault.strategies ? h("p", {}, "Configured and supported: ", h("span", { class: "mono" }, [].concat(fault.strategies).join(", "))) : null,
      fault.while_scaled_in ? h("p", { class: "hint" }, "The job was running scaled in: ClusterD goes straight to stopTrain and then dump or exit.") : null,
      fault.restart_fault_process !== undefined ? h("p", { class: "hint" }, "reset.json at globalFault: ",
        h("span", { class: "mono" }, fault.restart_fault_process === null ? "no fault list written" : `RestartFaultProcess=${fault.restart_fault_process}`)) : null,
      h("table", {}, h("thead", {}, h("tr", {}, ...["Step", "Strategy", "Why", "Labels", "Budget", "Status", "Time"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, ...(fault.steps || []).map((s) => h("tr", {},
          h("td", {}, s.kind), h("td", { class: "mono" }, s.strategy || ""), h("td", {}, s.reason || ""),
          h("td", { class: "mono" }, s.label_changes && Object.keys(s.label_changes).length ? toYaml(s.label_changes) : ""),
          h("td", {}, s.budget_change ? JSON.stringify(s.budget_change) : ""), h("td", {}, s.recover_status || ""),
          h("td", {}, s.duration_s !== undefined && s.duration_s !== null ? fmtMs(s.duration_s * 1000) : "")))))));
    return [...parts,
      data.end_state ? h("details", { open: true }, h("summary", {}, "End state"), h("pre", {}, toYaml(data.end_state))) : null].filter(Boolean);
  }
}
