// A job's event timeline: newest page first, older pages on scroll, live events appended in seq
// order. seq is gap-free per job, so any hole (a dropped socket, a server restart, a resync) is
// filled from REST with ?after_seq= before anything newer is shown: no gap, no duplicate.
import { api, fmtTime, h } from "./util.js";

const PAGE = 200;

function ranksOf(event) {
  const data = event.data || {};
  const ranks = data.ranks ?? data.rank ?? [];
  return (Array.isArray(ranks) ? ranks : [ranks]).map(String);
}

function nodesOf(event) {
  const data = event.data || {};
  const nodes = [].concat(data.node ?? [], data.nodes ?? []);
  return nodes.map(String);
}

export class Timeline {
  constructor({ jobId, lastSeq, list, scroller, olderState, status, onEvents }) {
    this.jobId = jobId;
    this.list = list;
    this.scroller = scroller;
    this.olderState = olderState;
    this.status = status;
    this.onEvents = onEvents || (() => {});
    this.bootSeq = lastSeq; // newest seq when the page was rendered
    this.oldest = null; // oldest seq shown
    this.newest = 0; // newest contiguous seq shown
    this.filling = null;
    this.fillAgain = false;
    this.loadingOlder = false;
    this.autoScroll = true;
    this.filters = { kind: "", severity: "", rank: "", node: "" };
    this.kinds = new Set();
    scroller.addEventListener("scroll", () => {
      if (scroller.scrollTop < 40) this.loadOlder();
    });
  }

  url(after, limit) {
    return `/api/v1/jobs/${this.jobId}/events/?after_seq=${after}&limit=${limit}`;
  }

  /** The newest page only: the page opens fast however long the history is. */
  async loadInitial() {
    const after = Math.max(0, this.bootSeq - PAGE);
    this.oldest = after + 1;
    this.newest = after;
    await this.fillGap();
    this.updateOlderState();
  }

  /** Fetch everything after the newest shown seq, page by page; serialised, re-run if asked meanwhile. */
  fillGap() {
    if (this.filling) { this.fillAgain = true; return this.filling; }
    this.filling = (async () => {
      try {
        do {
          this.fillAgain = false;
          for (;;) {
            const { data } = await api("GET", this.url(this.newest, 500));
            const fresh = data.results.filter((e) => e.seq > this.newest);
            if (fresh.length) this.append(fresh);
            if (!data.next) break;
          }
        } while (this.fillAgain);
      } finally {
        this.filling = null;
      }
    })();
    return this.filling;
  }

  /** A live event: in order → show; already shown → drop; ahead of us → fill the hole over REST. */
  ingest(event) {
    if (event.seq <= this.newest) return;
    if (event.seq === this.newest + 1 && !this.filling) this.append([event]);
    else this.fillGap();
  }

  append(events) {
    const fragment = document.createDocumentFragment();
    for (const event of events) {
      if (event.seq <= this.newest) continue;
      fragment.append(this.row(event));
      this.newest = event.seq;
    }
    this.list.append(fragment);
    if (this.autoScroll) this.scroller.scrollTop = this.scroller.scrollHeight;
    this.status.textContent = `${this.list.children.length} events shown, newest #${this.newest}`;
    this.onEvents(events);
  }

  async loadOlder() {
    if (this.loadingOlder || !this.oldest || this.oldest <= 1) return;
    this.loadingOlder = true;
    this.olderState.textContent = "Loading older events…";
    try {
      const after = Math.max(0, this.oldest - 1 - PAGE);
      const { data } = await api("GET", this.url(after, this.oldest - 1 - after));
      const older = data.results.filter((e) => e.seq < this.oldest);
      const before = this.scroller.scrollHeight;
      const fragment = document.createDocumentFragment();
      for (const event of older) fragment.append(this.row(event));
      this.list.prepend(fragment);
      if (older.length) this.oldest = older[0].seq;
      else this.oldest = 1;
      // Keep what the reader was looking at in place.
      this.scroller.scrollTop += this.scroller.scrollHeight - before;
    } finally {
      this.loadingOlder = false;
      this.updateOlderState();
    }
  }

  updateOlderState() {
    const more = this.oldest && this.oldest > 1;
    this.olderState.textContent = more ? "Scroll up for older events" : "Start of the history";
  }

  row(event) {
    this.addKind(event.kind);
    const li = h(
      "li",
      { class: event.severity, dataset: { seq: event.seq, kind: event.kind, severity: event.severity,
        ranks: ranksOf(event).join(","), nodes: nodesOf(event).join(",") } },
      h("span", { class: "seq" }, `#${event.seq}`),
      h("time", { datetime: event.occurred_at }, fmtTime(event.occurred_at)),
      h("span", { class: "kind" }, event.kind),
      h("span", { class: "message" }, event.message),
    );
    li.hidden = !this.matches(li);
    return li;
  }

  addKind(kind) {
    if (this.kinds.has(kind)) return;
    this.kinds.add(kind);
    const select = document.getElementById("ef-kind");
    const family = kind.split(".")[0] + ".*";
    if (!this.kinds.has(family)) {
      this.kinds.add(family);
      select.append(h("option", { value: family }, `${family} (all)`));
    }
    select.append(h("option", { value: kind }, kind));
  }

  matches(li) {
    const { kind, severity, rank, node } = this.filters;
    const d = li.dataset;
    if (kind && (kind.endsWith(".*") ? !d.kind.startsWith(kind.slice(0, -1)) : d.kind !== kind)) return false;
    if (severity && d.severity !== severity) return false;
    if (rank && !d.ranks.split(",").includes(rank.trim())) return false;
    if (node && !d.nodes.toLowerCase().includes(node.trim().toLowerCase())) return false;
    return true;
  }

  setFilters(filters) {
    this.filters = filters;
    let shown = 0;
    for (const li of this.list.children) {
      li.hidden = !this.matches(li);
      if (!li.hidden) shown += 1;
    }
    this.status.textContent = `${shown} of ${this.list.children.length} loaded events match`;
  }
}
