// "In effect", not "written" (design.md §4.4): the job's in_effect, said in words.
import { badge, h } from "./util.js";

const BASIS = {
  "created-with": "the job was created with it",
  admission: "merged in at admission, when the job was created",
  observed: "observed on the job as it was created",
  unknown: "not observed yet",
};
const WAITS = {
  recreate: "waits for the job to be recreated",
  "pod-restart": "waits for its pods to be created again",
  "image-build": "waits for the next image build",
  "training-start": "waits for the next start of training",
  nothing: "read at every fault: in effect",
};

/** One line: "Revision 1 (the job was created with it)". */
export function inEffectTitle(inEffect) {
  if (!inEffect) return "unknown";
  const basis = BASIS[inEffect.basis] || inEffect.basis;
  return inEffect.revision ? `revision ${inEffect.revision} (${basis})` : `no revision of this policy (${basis})`;
}

/** "written, waits for the job to be recreated" (never "applied" for something not in effect). */
export function pendingText(entry) {
  if (entry.waits_for === "nothing") return entry.written ? WAITS.nothing : "read at every fault: in effect once written (not written yet)";
  return `${entry.written ? "written" : "not written yet"}, ${WAITS[entry.waits_for] || entry.waits_for}`;
}

/** A block: the in-effect revision, process-level recovery, and what waits for what, per revision. */
export function renderInEffect(container, inEffect) {
  container.replaceChildren();
  if (!inEffect) return;
  const head = h("p", { class: "in-effect-title" }, h("strong", {}, "In effect: "), inEffectTitle(inEffect),
    inEffect.since ? h("span", { class: "hint" }, ` since ${new Date(inEffect.since).toLocaleString()}`) : null);
  container.append(head);
  if (inEffect.process_recovery && !inEffect.process_recovery.on) {
    container.append(h("p", { class: "issue warning", role: "note", dataset: { processRecovery: "off" } },
      "Process-level recovery is off until the job is recreated: the job was created without recover-strategy, so its PodGroup has no process-recover-enable=on and ClusterD refuses process-level recovery at Init. TaskD asks again every second and ClusterD reads the PodGroup afresh each time, so what is written later counts only if it also sets subHealthyStrategy=hotSwitch (or, up to MindCluster 7.1, process-recover-enable=on)."));
  }
  const pending = inEffect.pending || [];
  if (pending.length) {
    container.append(h("ul", { class: "pending" }, ...pending.map((p) => h("li", { dataset: { revision: p.revision, waitsFor: p.waits_for } },
      badge(`revision ${p.revision}`, p.waits_for === "nothing" && p.written ? "ok" : "warn"), " ",
      h("span", { class: "mono" }, p.keys.join(", ")), " — ", pendingText(p)))));
  } else if (inEffect.revision) {
    container.append(h("p", { class: "hint" }, "Nothing waits: every revision's keys are in effect."));
  }
  for (const note of inEffect.notes || []) {
    if (inEffect.process_recovery && !inEffect.process_recovery.on && note.startsWith("process-level recovery is off")) continue;
    container.append(h("p", { class: "hint" }, note));
  }
}

/** The jobs list cell: in effect / waits for a recreation / unknown, plus process-level recovery off. */
export function inEffectCell(brief) {
  if (!brief || brief.state === "unknown") return [h("span", { class: "hint" }, "unknown")];
  const parts = [brief.state === "in-effect" ? badge("in effect", "ok") : badge("waits for recreate", "warn")];
  if (brief.process_recovery === false) parts.push(" ", badge("process-level recovery off", "err"));
  return parts;
}
