// The policy form: the whole spec (design.md §4.1), validated as you type by the server's validator,
// previewed (patches, artifacts, effects, diff with the live objects), saved as a revision and pushed.
import { renderInEffect } from "./ineffect.js";
import { ApiError, api, badge, copyText, debounce, h, setupTabs, toYaml } from "./util.js";

const NUMBER_FIELDS = ["fault_retry_times", "max_restarts", "monitor_interval", "wait_reschedule_timeout", "ttp_port",
  "decision_timeout_s"];
const SELECT_FIELDS = ["mindcluster_version", "fault_scheduling", "sub_healthy_strategy", "default_strategy"];
const BOOL_FIELDS = ["pod_rescheduling", "platform_mode"];
const TERMINAL = new Set(["applied", "failed", "superseded", "drifted"]);
const RULE_NUMBERS = ["min_ranks", "max_ranks", "repeat_within_s", "min_repeats"];

/** A number input's value: an int when it is one, else the raw text so the validator names the field. */
function numberValue(input) {
  const raw = input.value.trim();
  if (raw === "") return undefined;
  return /^-?\d+$/.test(raw) ? Number(raw) : raw;
}

function describeAllowed(issue) {
  const allowed = issue.allowed;
  if (!allowed || !allowed.length) return null;
  if (allowed.length === 2 && allowed.every((v) => typeof v === "number") && issue.code === "out_of_range") {
    return `Allowed: ${allowed[0]} – ${allowed[1]}`;
  }
  return `Allowed: ${allowed.join(", ")}`;
}

export class PolicyForm {
  constructor(boot, { onSaved, onSync }) {
    this.boot = boot;
    this.jobId = boot.job.id;
    this.form = document.getElementById("policy-form");
    this.policy = boot.policy;
    this.onSaved = onSaved || (() => {});
    this.onSync = onSync || (() => {});
    this.sentStrategies = [];
    this.validateSeq = 0;
    this.previewSeq = 0;
    this.lastValid = null;
    this.syncTimer = null;
    this.trackedSync = null;
    this.previewTabs = setupTabs(document.getElementById("preview-tabs"));
    this.rulesList = document.getElementById("rules-list");
    this.validateSoon = debounce(() => this.validate(), 250);
    this.previewSoon = debounce(() => this.preview(), 150);

    this.form.addEventListener("input", (e) => this.changed(e));
    this.form.addEventListener("change", (e) => this.changed(e));
    this.form.addEventListener("submit", (e) => { e.preventDefault(); this.save(); });
    document.getElementById("reset-form").addEventListener("click", () => this.load(this.currentSpec()));
    document.getElementById("reapply").addEventListener("click", () => this.apply());
    document.getElementById("rule-add").addEventListener("click", () => {
      this.addRule({ match: {}, strategy: this.boot.platform_strategies[0] }, true);
      this.changed();
    });
    document.getElementById("preset-load").addEventListener("click", () => this.loadPreset());
    for (const button of document.querySelectorAll("button.copy")) {
      button.addEventListener("click", () => copyText(document.getElementById(button.dataset.copy).textContent));
    }
    if (!boot.can_edit) {
      document.getElementById("save-apply").disabled = true;
      document.getElementById("dirty-state").textContent = "You may view this policy but not change it (viewer role).";
    }
    this.load(this.currentSpec());
    this.loadPresets();
    if (this.policy.sync) this.showSync(this.policy.sync);
  }

  currentSpec() {
    return this.policy.spec || this.boot.defaults;
  }

  // --- reading and writing the form ------------------------------------------------------------
  field(name) { return document.getElementById(`f-${name}`); }

  load(spec) {
    const full = { ...this.boot.defaults, ...spec };
    for (const name of SELECT_FIELDS) this.field(name).value = full[name];
    for (const name of NUMBER_FIELDS) this.field(name).value = full[name] ?? "";
    this.field("backoff_limit").value = full.backoff_limit ?? "";
    for (const name of BOOL_FIELDS) this.field(name).checked = Boolean(full[name]);
    const chosen = new Set(full.strategies || []);
    for (const box of this.form.querySelectorAll('input[name="strategies"]')) box.checked = chosen.has(box.value);
    this.rulesList.replaceChildren();
    (full.decision_rules || []).forEach((rule) => this.addRule(rule));
    this.changed();
  }

  read() {
    const spec = {};
    for (const name of SELECT_FIELDS) spec[name] = this.field(name).value;
    for (const name of NUMBER_FIELDS) {
      const value = numberValue(this.field(name));
      if (value !== undefined) spec[name] = value;
    }
    const backoff = numberValue(this.field("backoff_limit"));
    spec.backoff_limit = backoff === undefined ? null : backoff;
    for (const name of BOOL_FIELDS) spec[name] = this.field(name).checked;
    // Canonical (priority) order, so an issue's /strategies/N maps back to one checkbox.
    spec.strategies = [...this.form.querySelectorAll('input[name="strategies"]')].filter((b) => b.checked).map((b) => b.value);
    this.sentStrategies = spec.strategies;
    spec.decision_rules = [...this.rulesList.children].map((el) => this.readRule(el));
    return spec;
  }

  // --- decision rules -------------------------------------------------------------------------
  addRule(rule, focus = false) {
    const index = this.rulesList.children.length;
    const match = rule.match || {};
    const id = (name) => `rule-${index}-${name}-${Math.random().toString(36).slice(2, 7)}`;
    const num = (name, label) => {
      const inputId = id(name);
      return h("div", {}, h("label", { for: inputId }, label),
        h("input", { id: inputId, type: "number", min: 0, size: 6, inputmode: "numeric", dataset: { key: name },
          value: match[name] ?? "" }));
    };
    const typesId = id("types");
    const levelId = id("level"), rank0Id = id("rank0"), strategyId = id("strategy");
    const types = new Set([].concat(match.fault_type || []));
    const el = h("div", { class: "rule", role: "group", "aria-label": `Rule ${index + 1}`, dataset: { extra: JSON.stringify(match) } },
      h("div", { class: "row" },
        h("fieldset", { id: typesId, style: "margin:0" }, h("legend", {}, "Fault types (none = any)"),
          ...this.boot.fault_types.map((type) => {
            const boxId = id(`type-${type}`);
            return h("span", {}, h("input", { type: "checkbox", id: boxId, value: type, dataset: { key: "fault_type" }, checked: types.has(type) }),
              " ", h("label", { for: boxId }, type), " ");
          })),
        h("div", {}, h("label", { for: levelId }, "Fault levels (comma-separated)"),
          h("input", { id: levelId, dataset: { key: "fault_level" }, value: [].concat(match.fault_level || []).join(", ") })),
        num("min_ranks", "Min ranks"), num("max_ranks", "Max ranks"),
        h("div", {}, h("label", { for: rank0Id }, "Rank 0 involved"),
          h("select", { id: rank0Id, dataset: { key: "rank0" } },
            h("option", { value: "" }, "any"),
            h("option", { value: "true", selected: match.rank0 === true }, "yes"),
            h("option", { value: "false", selected: match.rank0 === false }, "no"))),
        num("repeat_within_s", "Repeated within s"), num("min_repeats", "Min repeats"),
        h("div", {}, h("label", { for: strategyId }, "Then answer"),
          h("select", { id: strategyId, dataset: { key: "strategy" } },
            ...this.boot.decision_actions.map((a) => h("option", { value: a, selected: a === rule.strategy }, a === "ask" ? "ask a person" : a))))),
      h("div", { class: "row" },
        h("button", { type: "button", class: "small", onclick: () => this.moveRule(el, -1) }, "Move up"),
        h("button", { type: "button", class: "small", onclick: () => this.moveRule(el, 1) }, "Move down"),
        h("button", { type: "button", class: "small danger", onclick: () => { el.remove(); this.renumberRules(); this.changed(); } }, "Remove rule")),
      h("div", { class: "issues", dataset: { pointer: `/decision_rules/${index}` } }));
    this.rulesList.append(el);
    if (focus) el.querySelector("input").focus();
  }

  moveRule(el, delta) {
    const sibling = delta < 0 ? el.previousElementSibling : el.nextElementSibling;
    if (!sibling) return;
    if (delta < 0) sibling.before(el); else sibling.after(el);
    this.renumberRules();
    el.querySelector("button").focus();
    this.changed();
  }

  renumberRules() {
    [...this.rulesList.children].forEach((el, i) => {
      el.setAttribute("aria-label", `Rule ${i + 1}`);
      el.querySelector(".issues").dataset.pointer = `/decision_rules/${i}`;
    });
  }

  readRule(el) {
    const match = {};
    // Keys this editor does not show survive a round trip.
    try { Object.assign(match, JSON.parse(el.dataset.extra || "{}")); } catch (e) { /* ignore */ }
    for (const key of ["fault_type", "fault_level", "rank0", ...RULE_NUMBERS]) delete match[key];
    const types = [...el.querySelectorAll('input[data-key="fault_type"]:checked')].map((b) => b.value);
    if (types.length) match.fault_type = types;
    const levels = el.querySelector('[data-key="fault_level"]').value.split(",").map((s) => s.trim()).filter(Boolean);
    if (levels.length) match.fault_level = levels;
    const rank0 = el.querySelector('[data-key="rank0"]').value;
    if (rank0) match.rank0 = rank0 === "true";
    for (const key of RULE_NUMBERS) {
      const value = numberValue(el.querySelector(`[data-key="${key}"]`));
      if (value !== undefined) match[key] = value;
    }
    return { match, strategy: el.querySelector('[data-key="strategy"]').value };
  }

  // --- validation -----------------------------------------------------------------------------
  changed() {
    document.getElementById("platform-settings").hidden = !this.field("platform_mode").checked;
    const dirty = JSON.stringify(this.read()) !== JSON.stringify({ ...this.read(), ...this.normalised(this.currentSpec()) });
    this.dirty = dirty;
    if (this.boot.can_edit) {
      document.getElementById("dirty-state").textContent = dirty ? "Unsaved changes" : "No unsaved changes";
      document.getElementById("save-apply").textContent = dirty || !this.policy.revision ? "Save and apply" : "Save and apply (no changes)";
    }
    document.getElementById("validation-summary").textContent = "Checking…";
    this.validateSoon();
  }

  normalised(spec) {
    const full = { ...this.boot.defaults, ...spec };
    return {
      ...full,
      strategies: [...(full.strategies || [])],
      decision_rules: (full.decision_rules || []).map((r) => ({ match: r.match || {}, strategy: r.strategy })),
    };
  }

  async validate() {
    const seq = ++this.validateSeq;
    const spec = this.read();
    let result;
    try {
      ({ data: result } = await api("POST", "/api/v1/policies/validate/", { spec, job: this.jobId }));
    } catch (error) {
      if (seq !== this.validateSeq) return;
      if (!(error instanceof ApiError) || error.status >= 500) {
        // The server or the network hiccuped: say so and check again shortly, keeping what is shown.
        document.getElementById("validation-summary").textContent = "Could not check the policy just now; retrying…";
        setTimeout(() => { if (seq === this.validateSeq) this.validate(); }, 1000);
        return;
      }
      result = { valid: false, errors: error.errors.length ? error.errors : [{ code: "request_failed", field: "", message: error.message }], warnings: [] };
    }
    if (seq !== this.validateSeq) return; // a newer keystroke already asked
    this.showIssues(result.errors || [], result.warnings || []);
    this.lastValid = result.valid ? spec : null;
    if (result.valid) this.previewSoon();
    else this.clearPreview("Fix the errors to see the preview.");
  }

  /** The issue container for a JSON pointer: exact, then the nearest parent that has one. */
  containerFor(pointer) {
    let path = pointer || "";
    if (path.startsWith("manifest:")) return document.getElementById("issues-general");
    const strategy = path.match(/^\/strategies\/(\d+)/);
    if (strategy && this.sentStrategies[Number(strategy[1])]) {
      return document.getElementById(`issues-strategy-${this.sentStrategies[Number(strategy[1])]}`);
    }
    const byPointer = new Map([...this.form.querySelectorAll(".issues[data-pointer]")].map((el) => [el.dataset.pointer, el]));
    while (path) {
      if (byPointer.has(path)) return byPointer.get(path);
      path = path.slice(0, path.lastIndexOf("/"));
    }
    return document.getElementById("issues-general");
  }

  showIssues(errors, warnings) {
    for (const el of this.form.querySelectorAll(".issues")) el.replaceChildren();
    for (const el of this.form.querySelectorAll('[aria-invalid="true"]')) el.removeAttribute("aria-invalid");
    for (const issue of [...errors, ...warnings]) {
      const severity = issue.severity || (errors.includes(issue) ? "error" : "warning");
      const container = this.containerFor(issue.field);
      const allowed = describeAllowed(issue);
      container.append(h("p", { class: `issue ${severity}`, dataset: { code: issue.code, field: issue.field || "" } },
        h("strong", {}, severity === "error" ? "Error: " : "Warning: "), issue.message, " ",
        h("span", { class: "code" }, `[${issue.code}]`),
        allowed ? h("span", { class: "allowed" }, allowed) : null));
      if (severity === "error" && container.id) {
        for (const input of this.form.querySelectorAll(`[aria-describedby~="${container.id}"]`)) input.setAttribute("aria-invalid", "true");
      }
    }
    const summary = document.getElementById("validation-summary");
    summary.className = `validation-summary ${errors.length ? "error" : "ok"}`;
    const w = warnings.length ? `, ${warnings.length} warning${warnings.length > 1 ? "s" : ""}` : "";
    summary.textContent = errors.length
      ? `${errors.length} error${errors.length > 1 ? "s" : ""}${w}: the policy cannot be saved yet.`
      : `The policy is valid${w}.`;
    const save = document.getElementById("save-apply");
    if (this.boot.can_edit) save.disabled = errors.length > 0;
  }

  // --- preview --------------------------------------------------------------------------------
  clearPreview(message) {
    document.getElementById("effects").replaceChildren(h("p", { class: "hint" }, message));
    for (const id of ["out-patch", "out-image", "out-launcher", "out-flags", "out-manager", "out-diff"]) {
      document.getElementById(id).textContent = "";
    }
  }

  async preview() {
    const seq = ++this.previewSeq;
    const spec = this.lastValid;
    if (!spec) return;
    let result;
    try {
      ({ data: result } = await api("POST", `/api/v1/jobs/${this.jobId}/policy/preview/`, { spec }));
    } catch (error) {
      if (seq !== this.previewSeq) return;
      this.clearPreview(`Preview failed: ${error.message}`);
      if (!(error instanceof ApiError) || error.status >= 500) setTimeout(() => { if (seq === this.previewSeq) this.preview(); }, 1500);
      return;
    }
    if (seq !== this.previewSeq) return;
    const render = result.render;
    if (!render) {
      this.clearPreview(result.render_error || "Nothing to preview.");
      return;
    }
    const artifacts = render.artifacts || {};
    const docs = [`# AscendJob ${this.boot.job.namespace}/${this.boot.job.name} — merge patch\n${toYaml(render.job_patch)}`,
      `# PodGroup (read live by ClusterD) — merge patch\n${toYaml(render.podgroup_patch)}`];
    if (render.configmap) docs.push(`# ConfigMap mounted by the pod template\n${toYaml(render.configmap)}`);
    document.getElementById("out-patch").textContent = docs.join("\n---\n");
    document.getElementById("out-image").textContent = artifacts["Dockerfile.snippet"] || "# no image changes";
    document.getElementById("out-launcher").textContent = artifacts["launcher.sh"] || "# no launcher changes";
    document.getElementById("out-flags").textContent = artifacts["training-flags.txt"] || "# no training flags";
    document.getElementById("out-manager").textContent = artifacts["manager.py"] || "# no TaskD manager is needed for this policy";
    const live = result.live || {};
    document.getElementById("live-state").textContent = live.available
      ? `Against the live AscendJob (resourceVersion ${live.resource_version || "?"})${live.podgroup ? `; PodGroup ${live.podgroup}` : ""}`
      : `Live object not available (${live.reason || "unknown"}): ${live.message || ""}`;
    document.getElementById("out-diff").textContent = result.diff ? toYaml(result.diff) : "# no live object to compare with";
    this.showEffects(render.effects || [], render.notes || []);
  }

  /** Above "What changes": the revision in effect on the job and what waits for what, in words. */
  showInEffect(inEffect) {
    const container = document.getElementById("form-in-effect");
    if (container) renderInEffect(container, inEffect);
  }

  showEffects(effects, notes) {
    const container = document.getElementById("effects");
    container.replaceChildren();
    const order = ["recreate", "live", "pod-restart", "image-build", "training-start"];
    for (const when of order) {
      const items = effects.filter((e) => e.when === when);
      if (!items.length) continue;
      container.append(h("h4", {}, this.boot.effect_when[when] || when),
        h("ul", {}, ...items.map((e) => h("li", { dataset: { when } }, h("span", { class: "badge" }, e.target), " ", e.summary))));
    }
    this.showInEffect(this.policy && this.policy.in_effect);
    if (!effects.length) container.append(h("p", { class: "hint" }, "No changes to the cluster."));
    if (notes.length) container.append(h("details", {}, h("summary", {}, `Notes (${notes.length})`), h("ul", {}, ...notes.map((n) => h("li", {}, n)))));
  }

  // --- presets --------------------------------------------------------------------------------
  async loadPresets() {
    try {
      // What a preset name means for this job: its namespace's own first, then the global ones.
      const { cluster, namespace } = this.boot.job;
      const query = new URLSearchParams({ limit: "500", cluster, namespace });
      const { data } = await api("GET", `/api/v1/presets/?${query}`);
      const all = data.results || data;
      this.presets = all.filter((p) => p.namespace || !all.some((q) => q.namespace && q.name === p.name));
      const select = document.getElementById("preset-select");
      for (const preset of this.presets) {
        select.append(h("option", { value: preset.name }, `${preset.name}${preset.description ? ` — ${preset.description}` : ""}`));
      }
    } catch (e) { this.presets = []; }
  }

  loadPreset() {
    const name = document.getElementById("preset-select").value;
    const preset = (this.presets || []).find((p) => p.name === name);
    if (!preset) return;
    // Presets are release-agnostic; keep the job's release unless the preset names one.
    this.load({ ...preset.spec, mindcluster_version: preset.spec.mindcluster_version || this.boot.job.mindcluster_version });
    document.getElementById("validation-summary").focus?.();
  }

  // --- save, apply, progress ------------------------------------------------------------------
  async save() {
    if (!this.boot.can_edit) return;
    if (!this.dirty && this.policy.revision) { await this.apply(); return; }
    const button = document.getElementById("save-apply");
    button.disabled = true;
    const body = { spec: this.read(), comment: document.getElementById("f-comment").value };
    try {
      const { data } = await api("PUT", `/api/v1/jobs/${this.jobId}/policy/`, body, { "If-Match": `"${this.policy.revision || 0}"` });
      this.policy = data;
      document.getElementById("f-comment").value = "";
      this.onSaved(data);
      this.changed();
      if (data.sync) this.track(data.sync);
    } catch (error) {
      this.saveFailed(error);
    } finally {
      button.disabled = false;
    }
  }

  saveFailed(error) {
    const detail = document.getElementById("sync-detail");
    if (error instanceof ApiError && error.status === 409) {
      const current = error.body.current_revision;
      detail.replaceChildren(h("span", { class: "issue error", role: "alert" },
        `Someone saved revision ${current ?? "?"} while you were editing. `,
        h("button", { type: "button", class: "small", onclick: () => location.reload() }, "Reload to see it")));
    } else if (error instanceof ApiError && error.status === 400 && error.errors.length) {
      this.showIssues(error.errors.filter((e) => (e.severity || "error") === "error"), error.errors.filter((e) => e.severity === "warning"));
      detail.textContent = "Not saved: see the errors in the form.";
    } else {
      detail.replaceChildren(h("span", { class: "issue error", role: "alert" }, `Not saved: ${error.message}`));
    }
  }

  async apply() {
    try {
      const { data } = await api("POST", `/api/v1/jobs/${this.jobId}/policy/apply/`);
      this.track(data);
    } catch (error) {
      document.getElementById("sync-detail").replaceChildren(h("span", { class: "issue error", role: "alert" }, `Could not apply: ${error.message}`));
    }
  }

  /** Follow a push until it ends: poll /sync/ (events nudge it), then show applied or why it failed. */
  track(sync) {
    this.trackedSync = sync;
    this.showSync(sync);
    clearTimeout(this.syncTimer);
    const started = Date.now();
    const poll = async () => {
      try {
        const { data } = await api("GET", `/api/v1/jobs/${this.jobId}/sync/`);
        this.showSync(data);
        if (TERMINAL.has(data.state) && data.revision >= (this.trackedSync.revision || 0)) return;
      } catch (e) { /* transient: keep polling */ }
      this.syncTimer = setTimeout(poll, Date.now() - started > 30000 ? 2000 : 500);
    };
    this.syncTimer = setTimeout(poll, 300);
  }

  /** A policy.* event arrived: refresh the push state now rather than at the next poll. */
  nudge() {
    api("GET", `/api/v1/jobs/${this.jobId}/sync/`).then(({ data }) => this.showSync(data)).catch(() => {});
  }

  showSync(sync) {
    const steps = ["pending", "applying", "applied"];
    const reached = sync.state === "applied" ? 3 : sync.state === "applying" ? 2 : sync.state === "pending" ? 1 : 0;
    for (const li of document.querySelectorAll("#sync-progress li")) {
      const index = steps.indexOf(li.dataset.step);
      li.className = index < reached - 1 || sync.state === "applied" ? "done" : index === reached - 1 ? "current" : "";
      if (sync.state === "failed" && li.dataset.step === "applied") { li.className = "failed"; li.textContent = "Failed"; }
      else if (li.dataset.step === "applied") li.textContent = "Written";
    }
    const detail = document.getElementById("sync-detail");
    // "applied" means written to the cluster; what is in effect is shown apart (in_effect).
    const written = sync.state === "applied";
    const parts = [`Revision ${sync.revision}: `, badge(written ? "written" : sync.state, written ? "written" : sync.state)];
    if (written) parts.push(" to the cluster (what is in effect is shown under What changes)");
    if (sync.attempts) parts.push(` after ${sync.attempts} attempt${sync.attempts > 1 ? "s" : ""}`);
    if (sync.duration_ms) parts.push(` in ${Math.round(sync.duration_ms)} ms`);
    if (sync.last_error) parts.push(h("span", { class: `issue ${sync.state === "failed" ? "error" : "warning"}`, role: sync.state === "failed" ? "alert" : null, style: "display:block" }, sync.last_error));
    if (sync.state === "drifted" && (sync.drift || []).length) parts.push(h("span", { style: "display:block" }, `Changed by hand in the cluster: ${sync.drift.map((d) => d.key || JSON.stringify(d)).join(", ")}`));
    detail.replaceChildren(...parts);
    document.getElementById("reapply").hidden = !this.boot.can_edit || !["failed", "drifted"].includes(sync.state);
    this.onSync(sync);
  }
}
