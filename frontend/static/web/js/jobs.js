// Jobs overview at any size: the server filters, sorts and pages (the jobs list API's parameters, kept
// in the URL so a view is shareable and survives reload); the page shows one page and the total.
// Live: a frame about a job on this page re-reads that one row (/ui/jobs/<id>.json); nothing re-reads
// the list, except once after the websocket reconnects (frames may have been missed meanwhile).
import { inEffectCell } from "./ineffect.js";
import { couldSaveCell } from "./fleet.js";
import { LiveConnection } from "./live.js";
import { ApiError, api, badge, bootstrap, debounce, fmtDateTime, h } from "./util.js";

const boot = bootstrap();
const form = document.getElementById("job-filters");
const tbody = document.querySelector("#jobs-table tbody");
const FILTERS = ["q", "cluster", "namespace", "phase", "strategy", "in_effect", "could_save_min"];
const COLUMNS = 10;
const SORT_NAMES = {
  name: "name", cluster: "cluster", phase: "phase", strategy: "strategies", in_effect: "policy in effect",
  last_fault: "last incident", could_save: "could save",
};
const state = { ordering: "", offset: 0, limit: 50, page: boot.page || { count: 0, results: [] } };
const rowRefresh = new Map(); // job id -> pending timer

function fillSelect(id, values) {
  const select = document.getElementById(id);
  const keep = select.value;
  select.replaceChildren(select.options[0]);
  for (const value of values) select.append(h("option", { value }, value));
  select.value = keep;
}

function row(job) {
  const incident = job.last_incident;
  return h("tr", { dataset: { job: job.id } },
    h("th", { scope: "row" }, h("a", { href: `/jobs/${job.id}/` }, job.name), " ",
      job.recovering ? badge("Recovering", "live") : null),
    h("td", {}, `${job.cluster} / ${job.namespace}`),
    h("td", {}, `${job.framework} · ${job.mindcluster_version}`),
    h("td", { class: "phase" }, job.phase || "—"),
    h("td", {}, job.strategies.length ? job.strategies.map((s) => h("span", { class: "strategy-chip" }, s))
      : h("span", { class: "hint" }, job.revision ? "none" : "no policy")),
    h("td", { class: "in-effect-cell" }, ...inEffectCell(job.in_effect)),
    h("td", {}, job.sync_state ? badge(job.sync_state === "applied" ? "written" : job.sync_state, job.sync_state === "applied" ? "written" : job.sync_state) : h("span", { class: "hint" }, "—")),
    h("td", {}, String(job.restarts), job.budget_exhausted ? [" ", badge("budget used up", "err")] : null),
    h("td", {}, incident ? [`#${incident.number} `, badge(incident.outcome, incident.outcome), " ",
      h("span", { class: "hint" }, fmtDateTime(incident.opened_at))] : h("span", { class: "hint" }, "none")),
    couldSaveCell(job));
}

function params() {
  const values = new URLSearchParams();
  for (const name of FILTERS) {
    const value = form.elements[name].value.trim();
    if (value) values.set(name, value);
  }
  if (form.elements.recovering.checked) values.set("recovering", "true");
  if (state.ordering) values.set("ordering", state.ordering);
  if (state.limit !== 50) values.set("limit", String(state.limit));
  if (state.offset) values.set("offset", String(state.offset));
  return values;
}

function drawSortHeaders() {
  const key = state.ordering.replace(/^-/, "");
  for (const th of document.querySelectorAll("#jobs-table th[data-sort]")) {
    const sorted = th.dataset.sort === key;
    if (sorted) th.setAttribute("aria-sort", state.ordering.startsWith("-") ? "descending" : "ascending");
    else th.removeAttribute("aria-sort");
    th.querySelector("button .sort-mark").textContent = sorted ? (state.ordering.startsWith("-") ? " ▼" : " ▲") : "";
  }
}

function draw() {
  const { count, results } = state.page;
  tbody.replaceChildren(...results.map(row));
  if (!results.length) {
    const filtered = [...params().keys()].some((k) => FILTERS.includes(k) || k === "recovering");
    tbody.append(h("tr", {}, h("td", { colspan: COLUMNS, class: "empty" }, filtered ? "No job matches these filters."
      : "No jobs yet. Jobs appear when they are adopted from a cluster or registered through the API.")));
  }
  const first = results.length ? state.offset + 1 : 0;
  const last = state.offset + results.length;
  const key = state.ordering.replace(/^-/, "");
  const sorted = key ? `, sorted by ${SORT_NAMES[key] || key}${state.ordering.startsWith("-") ? " (descending)" : ""}` : "";
  document.getElementById("job-count").textContent =
    `Jobs ${first.toLocaleString()}–${last.toLocaleString()} of ${count.toLocaleString()}${sorted}.`;
  const pages = Math.max(1, Math.ceil(count / state.limit));
  const current = Math.floor(state.offset / state.limit) + 1;
  document.getElementById("page-of").textContent = `Page ${current.toLocaleString()} of ${pages.toLocaleString()}`;
  document.getElementById("page-first").disabled = document.getElementById("page-prev").disabled = state.offset === 0;
  document.getElementById("page-next").disabled = document.getElementById("page-last").disabled = last >= count;
  drawSortHeaders();
  const query = params().toString();
  history.replaceState(null, "", query ? `?${query}` : location.pathname);
}

function showError(error) {
  const box = document.getElementById("job-error");
  if (!error) { box.hidden = true; box.textContent = ""; return; }
  const first = (error.errors || [])[0] || {};
  const allowed = first.allowed ? ` Allowed: ${first.allowed.join(", ")}.` : "";
  box.textContent = `${first.field ? `${first.field}: ` : ""}${first.message || "The list could not be read."}${allowed}`;
  box.hidden = false;
}

let loading = 0;
async function load() {
  const mine = ++loading;
  try {
    const { data } = await api("GET", `/ui/jobs.json?${params()}`);
    if (mine !== loading) return; // a newer request was sent meanwhile
    state.page = data;
    showError(null);
    draw();
  } catch (e) {
    if (mine === loading) showError(e instanceof ApiError ? e.body : { errors: [{ message: String(e) }] });
  }
}

function goTo(offset) {
  state.offset = Math.max(0, offset);
  load();
}

/** A live frame about a job: if its row is on this page, re-read that row alone (coalesced). */
function onJobChanged(jobId) {
  if (!tbody.querySelector(`tr[data-job="${jobId}"]`) || rowRefresh.has(jobId)) return;
  rowRefresh.set(jobId, setTimeout(async () => {
    rowRefresh.delete(jobId);
    try {
      const { data } = await api("GET", `/ui/jobs/${jobId}.json`);
      const old = tbody.querySelector(`tr[data-job="${jobId}"]`);
      if (!old) return;
      const index = state.page.results.findIndex((j) => j.id === jobId);
      if (index >= 0) state.page.results[index] = data;
      old.replaceWith(row(data));
      document.getElementById("row-updates").textContent =
        `${data.name} updated: ${data.phase || "no phase"}${data.recovering ? ", recovering" : ""}.`;
    } catch (e) { /* the row stays as it was; the next frame retries */ }
  }, 150));
}

// Sort buttons in the column headers (keyboard: Tab to a header, Enter or Space sorts).
for (const th of document.querySelectorAll("#jobs-table th[data-sort]")) {
  const label = th.textContent;
  th.replaceChildren(h("button", { type: "button", class: "sort" }, label,
    h("span", { class: "sort-mark", "aria-hidden": "true" })));
  th.querySelector("button").addEventListener("click", () => {
    const key = th.dataset.sort;
    const current = state.ordering.replace(/^-/, "");
    const descending = current === key ? !state.ordering.startsWith("-") : th.dataset.first === "desc";
    state.ordering = descending ? `-${key}` : key;
    goTo(0);
  });
}

// Restore the view from the URL, then draw the page the server rendered with the HTML.
const choices = boot.choices || {};
for (const name of ["cluster", "namespace", "phase", "strategy", "in_effect"]) fillSelect(`f-${name}`, choices[name] || []);
const query = new URLSearchParams(location.search);
for (const name of FILTERS) if (query.has(name)) form.elements[name].value = query.get(name);
form.elements.recovering.checked = query.get("recovering") === "true";
state.ordering = query.get("ordering") || "";
state.limit = Number(query.get("limit")) || 50;
state.offset = Number(query.get("offset")) || 0;
form.elements.limit.value = String(state.limit);
if (boot.error) showError(boot.error);
draw();

const refilter = debounce(() => goTo(0), 250);
form.addEventListener("input", (e) => { if (e.target.name !== "limit") refilter(); });
form.addEventListener("change", (e) => {
  if (e.target.name === "limit") { state.limit = Number(e.target.value); goTo(0); } else refilter();
});
form.addEventListener("submit", (e) => e.preventDefault());
document.getElementById("page-first").addEventListener("click", () => goTo(0));
document.getElementById("page-prev").addEventListener("click", () => goTo(state.offset - state.limit));
document.getElementById("page-next").addEventListener("click", () => goTo(state.offset + state.limit));
document.getElementById("page-last").addEventListener("click",
  () => goTo(Math.max(0, Math.ceil(state.page.count / state.limit) - 1) * state.limit));
document.body.dataset.ready = "true";

let connectedBefore = false;
new LiveConnection({
  indicator: document.getElementById("conn-state"),
  subscriptions: () => [{ subscribe: { jobs: "all" } }],
  onConnected: () => {
    if (connectedBefore) load(); // frames were missed while the socket was down
    connectedBefore = true;
  },
  onMessage: (message) => {
    if ((message.type === "job" || message.type === "event") && message.job) onJobChanged(message.job);
  },
}).start();
