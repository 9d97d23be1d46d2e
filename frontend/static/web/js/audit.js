// Audit log: who changed what and when, with before/after; filters and pages of 50.
import { api, fmtDateTime, h, toYaml } from "./util.js";

const tbody = document.querySelector("#audit-table tbody");
const form = document.getElementById("audit-filters");
const status = document.getElementById("audit-status");
const PAGE = 50;
let offset = 0;
let count = 0;

async function load() {
  const params = new URLSearchParams({ limit: PAGE, offset });
  for (const name of ["action", "actor"]) if (form.elements[name].value.trim()) params.set(name, form.elements[name].value.trim());
  try {
    const { data } = await api("GET", `/api/v1/audit/?${params}`);
    count = data.count;
    tbody.replaceChildren(...data.results.map((e) => h("tr", {},
      h("td", {}, fmtDateTime(e.created_at)),
      h("td", {}, e.actor || "system", e.token_name ? h("div", { class: "hint" }, `token ${e.token_name}`) : null),
      h("td", { class: "mono" }, e.action),
      h("td", {}, e.object_repr || `${e.object_type} ${e.object_id}`),
      h("td", {}, h("details", {}, h("summary", {}, "Before / after"),
        h("h4", {}, "Before"), h("pre", {}, e.before === null ? "—" : toYaml(e.before)),
        h("h4", {}, "After"), h("pre", {}, e.after === null ? "—" : toYaml(e.after)))))));
    status.textContent = count ? `Entries ${offset + 1}–${offset + data.results.length} of ${count}` : "No entries.";
  } catch (error) {
    tbody.replaceChildren();
    status.textContent = error.status === 403 ? "Only administrators may read the audit log." : `Could not load: ${error.message}`;
  }
  document.getElementById("audit-prev").disabled = offset === 0;
  document.getElementById("audit-next").disabled = offset + PAGE >= count;
  document.body.dataset.ready = "true";
}

form.addEventListener("submit", (e) => { e.preventDefault(); offset = 0; load(); });
document.getElementById("audit-prev").addEventListener("click", () => { offset = Math.max(0, offset - PAGE); load(); });
document.getElementById("audit-next").addEventListener("click", () => { offset += PAGE; load(); });
load();
