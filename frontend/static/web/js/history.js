// Revision history: who changed the policy, when, what changed (merge patch), and restore.
import { api, fmtDateTime, h, toYaml } from "./util.js";

export class History {
  constructor(boot, { onRestored }) {
    this.jobId = boot.job.id;
    this.canEdit = boot.can_edit;
    this.container = document.getElementById("revisions");
    this.onRestored = onRestored;
    this.loaded = false;
  }

  async load() {
    this.loaded = true;
    try {
      const { data } = await api("GET", `/api/v1/jobs/${this.jobId}/policy/revisions/?limit=100`);
      this.render(data.results || []);
    } catch (error) {
      this.container.replaceChildren(h("p", { class: "issue error" }, `Could not load the history: ${error.message}`));
    }
  }

  render(revisions) {
    if (!revisions.length) {
      this.container.replaceChildren(h("p", { class: "empty" }, "No revisions yet: save the policy to create the first."));
      return;
    }
    const current = revisions[0].number;
    const rows = revisions.map((r) => h("tr", {},
      h("td", {}, h("strong", {}, `r${r.number}`), r.number === current ? " (current)" : ""),
      h("td", {}, r.author || "system"),
      h("td", {}, h("time", { datetime: r.created_at }, fmtDateTime(r.created_at))),
      h("td", {}, r.source + (r.preset ? ` (${r.preset})` : "") + (r.restored_from ? ` of r${r.restored_from}` : ""),
        r.comment ? h("div", { class: "hint" }, r.comment) : null),
      h("td", {}, r.diff ? h("details", {}, h("summary", {}, `${Object.keys(r.diff).length} field(s) changed`),
        h("pre", {}, toYaml(r.diff))) : h("span", { class: "hint" }, "first revision")),
      h("td", {}, this.canEdit && r.number !== current
        ? h("button", { type: "button", class: "small", onclick: () => this.restore(r.number) }, `Restore r${r.number}`)
        : null)));
    this.container.replaceChildren(h("table", {},
      h("caption", { class: "visually-hidden" }, "Policy revisions, newest first"),
      h("thead", {}, h("tr", {}, ...["Revision", "Author", "Time", "Source", "Change", ""].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, ...rows)));
  }

  async restore(number) {
    try {
      const { data } = await api("POST", `/api/v1/jobs/${this.jobId}/policy/revisions/${number}/restore/`);
      await this.load();
      this.onRestored(data);
    } catch (error) {
      this.container.prepend(h("p", { class: "issue error", role: "alert" }, `Restore failed: ${error.message}`));
    }
  }
}
