// Namespace default policies (issue 15): pick a cluster and namespace, read, set (spec or preset), remove, history.
import { api, fmtDateTime, h, toast } from "./util.js";

const pick = document.getElementById("ns-pick");
const panel = document.getElementById("ns-default");
const form = document.getElementById("ns-form");
const issues = document.getElementById("ns-issues");
let base = "";

async function init() {
  const [{ data: clusters }, { data: presets }] = await Promise.all([
    api("GET", "/api/v1/clusters/?limit=500"), api("GET", "/api/v1/presets/?limit=500")]);
  pick.elements.cluster.replaceChildren(...(clusters.results || clusters).map((c) => h("option", { value: c.name }, c.name)));
  // The global presets: a namespace's own are listed on the presets page and resolved by name here too.
  const names = [...new Set((presets.results || presets).map((p) => p.name))];
  form.elements.preset.append(...names.map((name) => h("option", { value: name }, name)));
  const params = new URLSearchParams(location.search);
  if (params.get("cluster")) pick.elements.cluster.value = params.get("cluster");
  if (params.get("namespace")) { pick.elements.namespace.value = params.get("namespace"); await show(); }
  document.body.dataset.ready = "true";
}

async function show() {
  const cluster = pick.elements.cluster.value, namespace = pick.elements.namespace.value.trim();
  base = `/api/v1/clusters/${encodeURIComponent(cluster)}/namespaces/${encodeURIComponent(namespace)}/default-policy/`;
  issues.replaceChildren();
  try {
    const [{ data }, { data: history }] = await Promise.all([api("GET", base), api("GET", `${base}revisions/?limit=100`)]);
    document.getElementById("ns-title").textContent = `${data.cluster} / ${data.namespace}`;
    document.getElementById("ns-state").textContent = data.revision
      ? `Revision ${data.revision} is in force${data.preset ? ` (from preset ${data.preset})` : ""}.`
      : "No default: new jobs keep exactly what they were submitted with.";
    form.elements.spec.value = data.spec ? JSON.stringify(data.spec, null, 2) : "";
    form.elements.preset.value = "";
    document.querySelector("#ns-history tbody").replaceChildren(...(history.results || history).map((r) => h("tr", {},
      h("th", { scope: "row" }, String(r.number)), h("td", {}, r.spec ? (r.spec.strategies || []).join(", ") || "none" : "removed"),
      h("td", {}, r.preset || ""), h("td", {}, r.author), h("td", {}, r.comment), h("td", {}, fmtDateTime(r.created_at)))));
    panel.hidden = false;
  } catch (e) {
    panel.hidden = true;
    toast(e.message);
  }
}

function showErrors(e) {
  issues.replaceChildren(...(e.errors && e.errors.length ? e.errors : [{ message: e.message }]).map((x) =>
    h("p", { class: "issue error" }, x.field ? `${x.field}: ${x.message}` : x.message)));
}

pick.addEventListener("submit", (event) => { event.preventDefault(); show(); });
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = { comment: form.elements.comment.value };
  if (form.elements.preset.value) body.preset = form.elements.preset.value;
  else {
    try { body.spec = JSON.parse(form.elements.spec.value || "{}"); } catch (e) { showErrors({ message: `The spec is not valid JSON: ${e.message}` }); return; }
  }
  try { await api("PUT", base, body); toast("Namespace default saved"); show(); } catch (e) { showErrors(e); }
});
document.getElementById("ns-remove").addEventListener("click", async () => {
  if (!window.confirm("Remove the namespace default? New jobs will be created without it.")) return;
  try { await api("DELETE", base); toast("Namespace default removed"); show(); } catch (e) { showErrors(e); }
});
init();
