"""Where a rehearsal of a saved job starts: the config it runs with, or the one after a recreation.

ClusterD keeps the recovery config it read at the job's first ``Init`` until the PodGroup is deleted
(facts §1), so the honest rehearsal of the next fault on a running job starts from that config — the
in-effect one — not from the draft or the last revision written. ``after-recreation`` rehearses the
draft (or the current revision) as a recreated job would run it. Both go through ``whatif.simulate``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from apps.core.numbers import is_ascii_digits
from apps.jobs.models import TrainingJob
from apps.policies.desired import PLATFORM_MODE
from apps.policies.in_effect import current_incarnation, in_effect, observed_config, process_recovery_on
from apps.policies.rendering.when import BACKOFF_LIMIT_KEY
from mindcluster import keys as c

StartAs = Literal["in-effect", "after-recreation"]
START_AS: tuple[str, ...] = ("in-effect", "after-recreation")


@dataclass(frozen=True)
class Start:
    spec: Any
    info: dict[str, Any]


def rehearsal_start(job: TrainingJob, draft: Any | None, start_as: StartAs) -> Start:
    """The raw spec to rehearse for ``job`` and a description of where it comes from."""
    current = job.current_revision.spec if job.current_revision is not None else None
    if start_as == "after-recreation":
        spec = draft if draft is not None else current
        return Start(
            spec,
            {
                "as": start_as,
                "revision": None if draft is not None else getattr(job.current_revision, "number", None),
                "note": "as the job would run after a recreation with "
                + ("the draft" if draft is not None else "its current revision"),
            },
        )
    view = in_effect(job)
    incarnation = current_incarnation(job)
    config = observed_config(incarnation)[0] if incarnation else None
    info: dict[str, Any] = {
        "as": start_as,
        "revision": view["revision"],
        "basis": view["basis"],
        "config": view["config"],
        "note": "",
    }
    if view["revision"] is not None:
        base = dict(job.revisions.get(number=view["revision"]).spec)
    else:
        base = dict(current or {})
    if config is None:
        info["note"] = (
            "what the job runs with is not observed yet; rehearsing its current revision as if it were "
            "in effect"
        )
        return Start(base or draft, info)
    spec = {**base, **_creation_fields(config)}
    # Keys ClusterD reads at every fault are in effect as soon as they are written: take the current ones.
    for key in ("wait_reschedule_timeout", "decision_rules", "default_strategy", "decision_timeout_s"):
        if current is not None and key in current:
            spec[key] = current[key]
    if not process_recovery_on(config):
        spec["strategies"] = []
        spec["platform_mode"] = False
        info["note"] = "process-level recovery is off for this job until it is recreated"
    else:
        info["note"] = "from the config the job was created with (what ClusterD snapshotted at Init)"
    if draft is not None:
        info["note"] += "; the draft is rehearsed as after-recreation"
    return Start(spec, info)


def _creation_fields(config: dict[str, str | None]) -> dict[str, Any]:
    strategies = config.get(c.ANNOTATION_RECOVER_STRATEGY)
    retry = config.get(c.LABEL_FAULT_RETRY_TIMES)
    backoff = config.get(BACKOFF_LIMIT_KEY)
    return {
        "strategies": strategies.split(",") if strategies else [],
        "fault_scheduling": config.get(c.LABEL_FAULT_SCHEDULING) or "off",
        "pod_rescheduling": config.get(c.LABEL_POD_RESCHEDULING) == "on",
        "sub_healthy_strategy": config.get(c.LABEL_SUB_HEALTHY_STRATEGY) or "ignore",
        "platform_mode": config.get(PLATFORM_MODE) == "on",
        "fault_retry_times": int(retry) if retry and is_ascii_digits(retry) else 0,
        "backoff_limit": int(backoff) if backoff and is_ascii_digits(backoff) else None,
    }
