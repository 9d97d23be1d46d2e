// The job page: wires the policy form, history, what-if panel and the live view to one socket.
import { Advice } from "./advice.js";
import { History } from "./history.js";
import { inEffectTitle, renderInEffect } from "./ineffect.js";
import { renderBudget, renderChart, renderFaultGrid, renderIncidents } from "./insights.js";
import { LiveConnection } from "./live.js";
import { PolicyForm } from "./policy.js";
import { Timeline } from "./timeline.js";
import { api, badge, bootstrap, debounce, setupTabs } from "./util.js";
import { WhatIf } from "./whatif.js";

const boot = bootstrap();
const jobId = boot.job.id;
const INCIDENT_FAMILIES = ["fault.", "training.", "strategy.", "recovery.", "dump.", "pod.", "job.", "decision."];
const POLL_WHEN_OFFLINE_MS = 1000;

let incidents = boot.incidents || [];
let budget = boot.budget;
const faultEvents = [];

// --- header ------------------------------------------------------------------------------------
function showSummary(summary) {
  if (!summary) return;
  const live = document.getElementById("live-badge");
  live.replaceChildren(summary.recovering ? badge("Recovering", "live") : "");
  if (summary.phase) document.getElementById("fact-phase").textContent = summary.phase;
}

function showSyncFact(sync) {
  // The push state is what was *written*; it is never shown as "in effect" (design.md §4.4).
  const text = sync ? (sync.state === "applied" ? `revision ${sync.revision} written` : `revision ${sync.revision} ${sync.state}`) : "never pushed";
  const kind = sync ? (sync.state === "applied" ? "written" : sync.state) : "";
  document.getElementById("fact-sync").replaceWith(Object.assign(badge(text, kind), { id: "fact-sync" }));
}

function showInEffect(inEffect) {
  document.getElementById("fact-in-effect").textContent = inEffectTitle(inEffect);
  renderInEffect(document.getElementById("job-in-effect"), inEffect);
  form.showInEffect(inEffect);
}

const refreshInEffect = debounce(async () => {
  try {
    const { data } = await api("GET", `/api/v1/jobs/${jobId}/policy/`);
    form.policy = { ...form.policy, in_effect: data.in_effect, sync: data.sync };
    showInEffect(data.in_effect);
  } catch (e) { /* the next policy event retries */ }
}, 300);

// --- tabs --------------------------------------------------------------------------------------
const history = new History(boot, {
  onRestored: (data) => {
    api("GET", `/api/v1/jobs/${jobId}/policy/`).then(({ data: policy }) => {
      form.policy = policy;
      form.load(policy.spec);
      document.getElementById("fact-revision").textContent = policy.revision;
      showInEffect(policy.in_effect);
      if (data.sync) form.track(data.sync);
    });
  },
});
const tabs = setupTabs(document.getElementById("job-tabs"), (id) => {
  const name = id.replace("tab-", "");
  if (name === "history") history.load();
  if (name === "live") renderAll();
  window.history.replaceState(null, "", name === "policy" ? location.pathname : `#${name}`);
});

const form = new PolicyForm(boot, {
  onSaved: (policy) => {
    document.getElementById("fact-revision").textContent = policy.revision;
    showInEffect(policy.in_effect);
    if (history.loaded) history.load();
  },
  onSync: (sync) => { showSyncFact(sync); if (["applied", "failed", "drifted"].includes(sync.state)) refreshInEffect(); },
});
showSyncFact(boot.policy.sync);
showInEffect(boot.policy.in_effect);
new WhatIf(boot, () => form.read());
new Advice(boot, (spec) => form.load(spec)); // "Use this" fills the form; saving stays a separate step

// --- live view ---------------------------------------------------------------------------------
function renderAll() {
  renderIncidents(document.getElementById("incidents"), incidents);
  renderBudget(document.getElementById("budget"), budget);
  renderChart(document.getElementById("chart"), incidents, (budget && budget.restarts) || []);
  renderFaultGrid(document.getElementById("fault-grid"), incidents, faultEvents);
}

const refreshLive = debounce(async () => {
  try {
    const [incidentPage, budgetBody] = await Promise.all([
      api("GET", `/api/v1/jobs/${jobId}/incidents/?limit=100`),
      api("GET", `/api/v1/jobs/${jobId}/budget/`),
    ]);
    incidents = [...incidentPage.data.results].reverse(); // the API is newest first; charts read left to right
    budget = budgetBody.data;
    showSummary({ recovering: incidents.some((i) => !i.closed_at) });
    renderAll();
  } catch (e) { /* the next event or reconnect refreshes again */ }
}, 300);

const timeline = new Timeline({
  jobId,
  lastSeq: boot.last_seq,
  list: document.getElementById("event-list"),
  scroller: document.getElementById("timeline"),
  olderState: document.getElementById("older-state"),
  status: document.getElementById("timeline-status"),
  onEvents: (events) => {
    let incidentRelated = false;
    for (const event of events) {
      if (event.kind.startsWith("policy.")) { form.nudge(); refreshInEffect(); }
      if (event.kind === "job.phase_changed" || event.kind === "job.recreated") refreshInEffect();
      if (event.kind === "fault.detected") faultEvents.push(event);
      if (event.kind === "job.phase_changed" && event.data && event.data.phase) showSummary({ phase: event.data.phase, recovering: incidents.some((i) => !i.closed_at) });
      if (INCIDENT_FAMILIES.some((f) => event.kind.startsWith(f))) incidentRelated = true;
    }
    if (incidentRelated && timeline.ready) refreshLive();
    if (timeline.ready && events.some((e) => e.kind === "fault.detected")) {
      renderFaultGrid(document.getElementById("fault-grid"), incidents, faultEvents);
    }
  },
});

const autoscroll = document.getElementById("autoscroll");
autoscroll.addEventListener("click", () => {
  timeline.autoScroll = !timeline.autoScroll;
  autoscroll.setAttribute("aria-pressed", String(timeline.autoScroll));
  autoscroll.textContent = timeline.autoScroll ? "Pause auto-scroll" : "Resume auto-scroll";
  if (timeline.autoScroll) timeline.scroller.scrollTop = timeline.scroller.scrollHeight;
});
const filters = document.getElementById("event-filters");
const applyFilters = () => timeline.setFilters({
  kind: document.getElementById("ef-kind").value,
  severity: document.getElementById("ef-severity").value,
  rank: document.getElementById("ef-rank").value,
  node: document.getElementById("ef-node").value,
});
filters.addEventListener("input", applyFilters);
filters.addEventListener("change", applyFilters);
filters.addEventListener("submit", (e) => e.preventDefault());

const connection = new LiveConnection({
  indicator: document.getElementById("conn-state"),
  subscriptions: () => [{ subscribe: { job: jobId, after_seq: timeline.newest } }],
  onConnected: () => timeline.fillGap().then(() => refreshLive()),
  onMessage: (message) => {
    if (message.type === "event" && message.job === jobId) timeline.ingest(message);
    // A burst of fault reports sent as one frame (this socket was behind): load them over REST.
    else if (message.type === "coalesced" && message.job === jobId) timeline.fillGap();
    else if (message.type === "resync" && message.job === jobId) {
      // Too far behind to replay over the socket: page over REST, then follow live again from there.
      timeline.fillGap().then(() => connection.send({ subscribe: { job: jobId, after_seq: timeline.newest } }));
    }
  },
});

showSummary(boot.summary);
tabs.show(`tab-${(location.hash || "#policy").slice(1)}`);
timeline.loadInitial().finally(() => {
  timeline.ready = true;
  renderAll();
  performance.mark("data-ready");
  document.body.dataset.ready = "true"; // the benchmark's and the tests' "first content" marker
  connection.start();
});
// While the socket is down the page still moves: poll the gap over REST.
setInterval(() => { if (!connection.connected && timeline.ready) timeline.fillGap().catch(() => {}); }, POLL_WHEN_OFFLINE_MS);
