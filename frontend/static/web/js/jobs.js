// Jobs overview: every visible job with strategies, sync state, restarts, last incident and a live
// badge; filters in the URL (shareable, survive reload); live updates from the websocket.
import { inEffectCell } from "./ineffect.js";
import { FLEET_FILTER, couldSaveCell, couldSaveMatches } from "./fleet.js";
import { LiveConnection } from "./live.js";
import { api, badge, bootstrap, debounce, fmtDateTime, h } from "./util.js";

const boot = bootstrap();
let jobs = boot.jobs || [];
const form = document.getElementById("job-filters");
const tbody = document.querySelector("#jobs-table tbody");
const FILTERS = ["q", "cluster", "namespace", "phase", "strategy", FLEET_FILTER];

function fillSelect(id, values) {
  const select = document.getElementById(id);
  const keep = select.value;
  select.replaceChildren(select.options[0]);
  for (const value of [...new Set(values)].filter(Boolean).sort()) select.append(h("option", { value }, value));
  select.value = keep;
}

function fillFilterChoices() {
  fillSelect("f-cluster", jobs.map((j) => j.cluster));
  fillSelect("f-namespace", jobs.map((j) => j.namespace));
  fillSelect("f-phase", jobs.map((j) => j.phase));
  fillSelect("f-strategy", jobs.flatMap((j) => j.strategies));
}

function currentFilters() {
  const values = Object.fromEntries(FILTERS.map((name) => [name, form.elements[name].value.trim()]));
  values.recovering = form.elements.recovering.checked;
  return values;
}

function matches(job, f) {
  if (f.q && !`${job.name} ${job.namespace}`.toLowerCase().includes(f.q.toLowerCase())) return false;
  if (f.cluster && job.cluster !== f.cluster) return false;
  if (f.namespace && job.namespace !== f.namespace) return false;
  if (f.phase && job.phase !== f.phase) return false;
  if (f.strategy && !job.strategies.includes(f.strategy)) return false;
  if (f.recovering && !job.recovering) return false;
  return couldSaveMatches(job, f[FLEET_FILTER]);
}

function row(job) {
  const incident = job.last_incident;
  return h("tr", { dataset: { job: job.id } },
    h("th", { scope: "row" }, h("a", { href: `/jobs/${job.id}/` }, job.name), " ",
      job.recovering ? badge("Recovering", "live") : null),
    h("td", {}, `${job.cluster} / ${job.namespace}`),
    h("td", {}, `${job.framework} · ${job.mindcluster_version}`),
    h("td", {}, job.phase || "—"),
    h("td", {}, job.strategies.length ? job.strategies.map((s) => h("span", { class: "strategy-chip" }, s))
      : h("span", { class: "hint" }, job.revision ? "none" : "no policy")),
    h("td", { class: "in-effect-cell" }, ...inEffectCell(job.in_effect)),
    h("td", {}, job.sync_state ? badge(job.sync_state === "applied" ? "written" : job.sync_state, job.sync_state === "applied" ? "written" : job.sync_state) : h("span", { class: "hint" }, "—")),
    h("td", {}, String(job.restarts), job.budget_exhausted ? [" ", badge("budget used up", "err")] : null),
    h("td", {}, incident ? [`#${incident.number} `, badge(incident.outcome, incident.outcome), " ",
      h("span", { class: "hint" }, fmtDateTime(incident.opened_at))] : h("span", { class: "hint" }, "none")),
    couldSaveCell(job));
}

function render() {
  const f = currentFilters();
  const shown = jobs.filter((job) => matches(job, f));
  tbody.replaceChildren(...shown.map(row));
  if (!shown.length) tbody.append(h("tr", {}, h("td", { colspan: 10, class: "empty" }, jobs.length ? "No job matches these filters." : "No jobs yet. Jobs appear when they are adopted from a cluster or registered through the API.")));
  const recovering = shown.filter((j) => j.recovering).length;
  document.getElementById("job-count").textContent = `${shown.length} of ${jobs.length} jobs shown${recovering ? `, ${recovering} recovering` : ""}.`;
  const params = new URLSearchParams(Object.entries(f).filter(([, v]) => v && v !== false).map(([k, v]) => [k, String(v)]));
  history.replaceState(null, "", params.toString() ? `?${params}` : location.pathname);
}

const refresh = debounce(async () => {
  try {
    const { data } = await api("GET", "/ui/jobs.json");
    jobs = data.jobs;
    fillFilterChoices();
    render();
  } catch (e) { /* keep what we show; the next frame or reconnect retries */ }
}, 400);

/** A job summary frame (name, phase, last event): show the phase now, re-read the full rows soon. */
function onJobFrame(frame) {
  const job = jobs.find((j) => j.id === frame.job);
  if (job && frame.phase !== undefined) {
    job.phase = frame.phase;
    render();
  }
  refresh(); // strategies, sync state, restarts and incidents are not in the frame
}

// Restore filters from the URL, then draw.
const params = new URLSearchParams(location.search);
fillFilterChoices();
for (const name of FILTERS) if (params.has(name)) form.elements[name].value = params.get(name);
form.elements.recovering.checked = params.get("recovering") === "true";
form.addEventListener("input", render);
form.addEventListener("change", render);
form.addEventListener("submit", (e) => e.preventDefault());
render();
document.body.dataset.ready = "true";

new LiveConnection({
  indicator: document.getElementById("conn-state"),
  subscriptions: () => [{ subscribe: { jobs: "all" } }],
  onConnected: () => refresh(),
  onMessage: (message) => {
    if (message.type === "job") onJobFrame(message);
    else if (message.type === "event") refresh();
  },
}).start();
