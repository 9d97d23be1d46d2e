// Presets: list, create, edit and delete (built-ins are read-only); specs checked as you type.
import { api, bootstrap, debounce, h, toast } from "./util.js";

const boot = bootstrap();
const tbody = document.querySelector("#presets-table tbody");
const form = document.getElementById("preset-form");
const specField = document.getElementById("p-spec");
const issues = document.getElementById("issues-p-spec");
let editing = null;

function issueList(items) {
  return items.map((i) => h("p", { class: `issue ${i.severity || "error"}` }, i.field ? `${i.field}: ` : "", i.message,
    i.allowed ? h("span", { class: "allowed" }, `Allowed: ${i.allowed.join(", ")}`) : null));
}

async function load() {
  const { data } = await api("GET", "/api/v1/presets/?limit=500");
  const presets = data.results || data;
  tbody.replaceChildren(...presets.map((p) => h("tr", { dataset: { preset: p.name } },
    h("th", { scope: "row" }, p.name, p.builtin ? h("span", { class: "badge", style: "margin-left:.4rem" }, "built-in") : null),
    h("td", {}, p.namespace ? `${p.cluster}/${p.namespace}` : "global"),
    h("td", {}, p.description || ""),
    h("td", {}, ...(p.spec.strategies || []).map((s) => h("span", { class: "strategy-chip" }, s))),
    h("td", {}, p.created_by || (p.builtin ? "—" : "")),
    h("td", {}, p.builtin ? h("span", { class: "hint" }, "read-only") : [
      h("button", { type: "button", class: "small", onclick: () => edit(p) }, `Edit ${p.name}`), " ",
      h("button", { type: "button", class: "small danger", onclick: () => remove(p) }, `Delete ${p.name}`)]))));
  document.body.dataset.ready = "true";
}

function edit(preset) {
  editing = preset.url;
  form.elements.name.value = preset.name;
  form.elements.name.readOnly = true;
  form.elements.cluster.value = preset.cluster || "";
  form.elements.namespace.value = preset.namespace || "";
  form.elements.cluster.readOnly = form.elements.namespace.readOnly = true;
  form.elements.description.value = preset.description || "";
  specField.value = JSON.stringify(preset.spec, null, 2);
  document.getElementById("preset-form-title").textContent = `Edit preset ${preset.name}`;
  document.getElementById("preset-save").textContent = "Save preset";
  form.elements.description.focus();
  check();
}

function clear() {
  editing = null;
  form.reset();
  form.elements.name.readOnly = false;
  form.elements.cluster.readOnly = form.elements.namespace.readOnly = false;
  specField.value = JSON.stringify({ strategies: ["recover", "dump"], fault_scheduling: "grace" }, null, 2);
  document.getElementById("preset-form-title").textContent = "New preset";
  document.getElementById("preset-save").textContent = "Create preset";
  check();
}

async function remove(preset) {
  if (!window.confirm(`Delete preset ${preset.name}?`)) return;
  try {
    await api("DELETE", preset.url);
    toast(`Deleted ${preset.name}`);
    load();
  } catch (error) { toast(`Not deleted: ${error.message}`); }
}

function parseSpec() {
  try { return { spec: JSON.parse(specField.value || "{}") }; } catch (e) { return { error: `Not valid JSON: ${e.message}` }; }
}

const check = debounce(async () => {
  const { spec, error } = parseSpec();
  if (error) { issues.replaceChildren(h("p", { class: "issue error" }, error)); return; }
  try {
    const { data } = await api("POST", "/api/v1/policies/validate/", { spec });
    const all = [...data.errors, ...data.warnings];
    issues.replaceChildren(...(all.length ? issueList(all) : [h("p", { class: "hint" }, "The policy is valid.")]));
  } catch (e) { issues.replaceChildren(h("p", { class: "issue error" }, e.message)); }
}, 250);

specField.addEventListener("input", check);
document.getElementById("preset-cancel").addEventListener("click", clear);
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const { spec, error } = parseSpec();
  if (error) { issues.replaceChildren(h("p", { class: "issue error", role: "alert" }, error)); return; }
  const body = { name: form.elements.name.value.trim(), description: form.elements.description.value, spec };
  const cluster = form.elements.cluster.value.trim(), namespace = form.elements.namespace.value.trim();
  if (!editing && (cluster || namespace)) Object.assign(body, { cluster, namespace });
  try {
    if (editing) await api("PUT", editing, body);
    else await api("POST", "/api/v1/presets/", body);
    toast(editing ? "Preset saved" : "Preset created");
    clear();
    load();
  } catch (e) {
    const nameIssues = e.errors.filter((x) => ["name", "cluster", "namespace"].includes(x.field));
    document.getElementById("issues-p-name").replaceChildren(...issueList(nameIssues));
    issues.replaceChildren(...issueList(e.errors.filter((x) => !["name", "cluster", "namespace"].includes(x.field))), ...(e.errors.length ? [] : [h("p", { class: "issue error" }, e.message)]));
  }
});
if (!boot.user.is_editor) {
  form.querySelector("#preset-save").disabled = true;
  form.prepend(h("p", { class: "hint" }, "Creating presets needs the editor role on the namespace they are for."));
}
clear();
load();
