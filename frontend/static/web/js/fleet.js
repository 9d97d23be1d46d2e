// Jobs list: the strategy-advice column and filter (issue #18), "could save ≥ X NPU-hours/week".
import { h } from "./util.js";

export const FLEET_FILTER = "could_save";

/** The column's cell: the stored figure of the job's best candidate policy against its current one. */
export function couldSaveCell(job) {
  if (job.could_save === null || job.could_save === undefined) return h("td", { class: "hint" }, "—");
  const title = job.advice_best ? `best: ${(job.advice_best.strategies || []).join(", ") || "no process strategy"}` : "";
  return h("td", { title }, h("a", { href: `/jobs/${job.id}/#advice` }, job.could_save >= 1e11 ? "job fails now" : job.could_save.toFixed(1)));
}

/** True when the job passes the "could save ≥ X" filter (empty = no filter). */
export function couldSaveMatches(job, value) {
  if (value === "" || value === undefined) return true;
  const min = Number(value);
  return Number.isFinite(min) && job.could_save !== null && job.could_save !== undefined && job.could_save >= min;
}
