// "Recreate to apply": shown when keys of a newer revision wait for the job to be recreated
// (in_effect.pending[].waits_for == "recreate"); without in_effect (older servers) it is offered
// whenever the job has a policy, with the same warning about what it costs.
import { api, bootstrap, h, toast } from "./util.js";

const section = document.getElementById("recreate");
const form = document.getElementById("recreate-form");
const issues = document.getElementById("recreate-issues");
const job = bootstrap().job || {};

function waiting(policy) {
  const inEffect = policy.in_effect;
  if (!inEffect) return { offer: policy.revision != null, keys: [] };
  const pending = (inEffect.pending || []).filter((p) => p.waits_for === "recreate");
  return { offer: pending.length > 0, keys: pending.flatMap((p) => p.keys), revision: pending.at(-1)?.revision };
}

async function load() {
  if (!section || !job.id || !bootstrap().can_edit) return;
  const [{ data: policy }, { data: revisions }] = await Promise.all([
    api("GET", `/api/v1/jobs/${job.id}/policy/`),
    api("GET", `/api/v1/jobs/${job.id}/policy/revisions/?limit=50`),
  ]);
  const state = waiting(policy);
  if (!state.offer) return;
  document.getElementById("recreate-why").textContent = state.keys.length
    ? `These keys are written but take effect only when the job is created: ${state.keys.join(", ")}.`
    : "MindCluster reads the recovery strategies, rescheduling labels and restart budget only when a job is created.";
  const select = form.elements.revision;
  select.replaceChildren(...(revisions.results || revisions).map((r) =>
    h("option", { value: r.number, selected: r.number === (state.revision ?? policy.revision) }, `revision ${r.number} (${r.source})`)));
  section.hidden = false;
}

// Polls the operation until it has finished (or a minute has passed: the page keeps working).
async function follow(url) {
  let op = { finished: false };
  for (let i = 0; i < 60 && !op.finished; i += 1) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    ({ data: op } = await api("GET", url));
  }
  return op;
}

form?.addEventListener("submit", async (event) => {
  event.preventDefault();
  issues.replaceChildren();
  const body = { confirm: form.elements.confirm.value.trim(), revision: Number(form.elements.revision.value) };
  try {
    // 202: the manifest is recorded and a worker deletes and creates the job; follow its state.
    const { data: queued } = await api("POST", `/api/v1/jobs/${job.id}/recreate/`, body);
    form.reset();
    section.hidden = true;
    toast(`Recreate ${queued.id} queued (revision ${queued.revision})`);
    const done = await follow(queued.status_url);
    if (done.state === "done") toast(`Recreated with revision ${done.revision}: new UID ${done.new_uid}`);
    else if (done.finished) toast(`Recreate ${done.id} ${done.state.replace("_", " ")}: ${done.last_error}`);
  } catch (e) {
    issues.replaceChildren(...(e.errors.length ? e.errors : [{ message: e.message }]).map((x) => h("p", { class: "issue error" }, x.message)));
  }
});
load().catch(() => {});
