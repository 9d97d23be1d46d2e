// Decisions inbox (platform mode): pending questions from ClusterD, a countdown to each deadline,
// and the allowed answers as buttons. Refreshed by websocket frames and a slow poll.
import { LiveConnection } from "./live.js";
import { api, bootstrap, debounce, fmtDateTime, h, toast } from "./util.js";

const boot = bootstrap();
const container = document.getElementById("decisions");
let decisions = [];

function secondsLeft(decision) {
  return decision.deadline_at ? Math.max(0, Math.round((Date.parse(decision.deadline_at) - Date.now()) / 1000)) : null;
}

function faultsText(decision) {
  const faults = decision.faults || [];
  if (!faults.length) return decision.confirm_fault || "unknown";
  return faults.map((f) => `rank ${f.rank} (${f.type === "0" || f.type === 0 ? "on-chip memory" : "other"})`).join(", ");
}

function render() {
  if (!decisions.length) {
    container.replaceChildren(h("p", { class: "empty" }, "Nothing is waiting for an answer."));
    return;
  }
  container.replaceChildren(...decisions.map((d) => {
    const left = secondsLeft(d);
    const answers = d.allowed || d.allowed_strategies || boot.answers;
    const job = d.job_name ? `${d.namespace ? `${d.namespace}/` : ""}${d.job_name}` : `job ${d.job}`;
    return h("article", { class: "card", "aria-label": `Decision for ${job}`, dataset: { decision: d.id } },
      h("div", { class: "row" }, h("h2", { style: "margin:0" }, h("a", { href: `/jobs/${d.job}/#live` }, job)),
        h("span", { class: "spacer" }),
        left === null ? null : h("span", { class: `countdown ${left < 30 ? "urgent" : ""}`, dataset: { deadline: d.deadline_at } },
          `${left} s left`)),
      h("p", {}, `Faults: ${faultsText(d)}`),
      d.reason ? h("p", { class: "hint" }, d.reason) : null,
      h("p", { class: "hint" }, `Asked ${fmtDateTime(d.created_at)}; default at the deadline: ${d.default_strategy || "the policy's default"}`),
      h("div", { class: "row", role: "group", "aria-label": "Answer" },
        ...answers.map((strategy) => h("button", { type: "button", class: "primary", onclick: () => answer(d, strategy) }, `Answer ${strategy}`))));
  }));
}

async function answer(decision, strategy) {
  try {
    await api("POST", `/api/v1/decisions/${decision.id}/`, { strategy });
    toast(`Answered ${strategy}`);
  } catch (error) {
    toast(`Not answered: ${error.message}`);
  }
  load();
}

async function load() {
  try {
    const { data } = await api("GET", "/api/v1/decisions/?state=pending&limit=200");
    decisions = data.results || data;
    render();
  } catch (error) {
    container.replaceChildren(h("p", { class: "issue error" }, error.status === 404
      ? "The decisions API is not available on this server." : `Could not load decisions: ${error.message}`));
  }
}

// Countdowns tick locally; the list itself is re-read on events and every 5 s.
setInterval(() => {
  for (const el of container.querySelectorAll(".countdown")) {
    const left = Math.max(0, Math.round((Date.parse(el.dataset.deadline) - Date.now()) / 1000));
    el.textContent = `${left} s left`;
    el.classList.toggle("urgent", left < 30);
  }
}, 1000);
setInterval(load, 5000);
const reload = debounce(load, 200);
load().then(() => { document.body.dataset.ready = "true"; });
new LiveConnection({
  indicator: document.getElementById("conn-state"),
  subscriptions: () => [{ subscribe: { jobs: "all" } }],
  onConnected: reload,
  onMessage: () => reload(),
}).start();
