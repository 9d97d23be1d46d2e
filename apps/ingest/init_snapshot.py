"""ClusterD's Init snapshot of a job's recovery config, where the cluster makes it observable.

The real ClusterD reads the config once, at the job's first ``Init`` (``GetRecoverBaseInfo``,
component/clusterd/pkg/domain/common/utils.go:100-140, called from
component/clusterd/pkg/application/recover/fault_recover_service.go:570-592) and only logs it. The
built-in cluster also writes it as a Kubernetes Event; this module is the one place that reads such an
Event, so pointing the product at another reason or message format is a change here only.

A refused ``Init`` (``ProcessRecoverEnableOff``, code 403) is *not* a snapshot: ClusterD records
nothing for it (fault_recover_service.go:579-585) and TaskD calls ``Init`` again a second later, for
ever (component/taskd/taskd/go/framework_backend/manager/manager.go:468-492), so each refusal reads
the PodGroup as it is *then*, our later pushes included. ``InitSnapshot.accepted`` says which it was;
only an accepted one says what ClusterD runs the job with.

Accepted: an Event whose ``reason`` is in ``INIT_SNAPSHOT_REASONS``, about the AscendJob or its PodGroup
``<job>-<uid>``, whose message holds the snapshot either as a JSON object or as ``key=value`` pairs
separated by ``;`` (``recover-strategy=retry,recover; fault-scheduling=grace; platform-mode=false``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apps.cluster.timestamps import parse_k8s_time
from apps.ingest.observation import JobRef, best_time, split_uid_suffix
from mindcluster import keys as c

# ``InitSuccess`` / ``ProcessRecoverEnableOff`` (a refused Init, code 403) are what the built-in
# ClusterD writes; the others are accepted for platforms that publish the snapshot their own way.
INIT_SNAPSHOT_REASONS = frozenset(
    {"InitSuccess", "ProcessRecoverEnableOff", "RecoverConfigSnapshot", "InitSnapshot", "JobInitSnapshot"}
)
REFUSED_INIT_REASONS = frozenset({"ProcessRecoverEnableOff"})
# ClusterD's own strategy list carries the rescheduling switches as pseudo-strategies (utils.go:114-123).
_JOB_RESCHEDULING = "job-rescheduling"
_POD_RESCHEDULING = "pod-rescheduling"
# fault-scheduling as ClusterD knows it: grace and force both add job-rescheduling, so the snapshot
# cannot tell them apart; the reader keeps the PodGroup's own grace/force where it has one.
RESCHEDULING_ON = "grace"
# ``key=value`` / ``key: value`` pairs. A key is the part of a run of [\w.-] from its first ASCII
# letter; trying only at the start of each run (the lookbehind) with possessive quantifiers reads
# each run once, so a long run with no "=" after it is linear, not a rescan from every letter.
_PAIR = re.compile(
    r"(?<![\w.-])(?:(?![A-Za-z])[\w.-])*+(?P<key>[A-Za-z][\w.-]*+)\s*+[=:]\s*+(?P<value>[^;\n]*+)"
)
_TRUE = ("true", "on", "yes", "1")
_LABEL_KEYS = {
    c.LABEL_FAULT_SCHEDULING: c.LABEL_FAULT_SCHEDULING,
    c.LABEL_POD_RESCHEDULING: c.LABEL_POD_RESCHEDULING,
    c.LABEL_SUB_HEALTHY_STRATEGY: c.LABEL_SUB_HEALTHY_STRATEGY,
    c.LABEL_PROCESS_RECOVER_ENABLE: c.LABEL_PROCESS_RECOVER_ENABLE,
    c.LABEL_FAULT_RETRY_TIMES: c.LABEL_FAULT_RETRY_TIMES,
}
_STRATEGY_KEYS = (c.ANNOTATION_RECOVER_STRATEGY, "strategies", "recover-strategies")
_PLATFORM_KEYS = ("platform-mode", "platform_mode", "PlatFormMode", c.ANNOTATION_PLATFORM_STRATEGY)


@dataclass(frozen=True)
class InitSnapshot:
    job: JobRef
    keys: dict[str, dict[str, str]]  # PodGroup-style {"labels": ..., "annotations": ...}
    at: datetime
    accepted: bool = True  # False: a refused Init, what the PodGroup said at that retry, nothing kept


def _pairs(message: str) -> dict[str, Any]:
    start = message.find("{")
    if start >= 0:
        try:
            loaded = json.loads(message[start : message.rfind("}") + 1])
        except ValueError:
            loaded = None
        if isinstance(loaded, dict):
            return loaded
    return {m.group("key"): m.group("value").strip() for m in _PAIR.finditer(message)}


def snapshot_keys(message: str) -> dict[str, dict[str, str]] | None:
    """PodGroup-style keys from a snapshot message; None when it names none of them."""
    pairs = _pairs(message)
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    for key, value in pairs.items():
        if key in _LABEL_KEYS and value not in (None, ""):
            labels[_LABEL_KEYS[key]] = str(value)
        elif key == "strategies" and isinstance(value, list):
            # ClusterD's own list: process strategies plus the rescheduling pseudo-strategies and exit.
            names = [str(name) for name in value]
            process = [n for n in names if n not in (_JOB_RESCHEDULING, _POD_RESCHEDULING)]
            annotations[c.ANNOTATION_RECOVER_STRATEGY] = ",".join(process)
            labels[c.LABEL_FAULT_SCHEDULING] = RESCHEDULING_ON if _JOB_RESCHEDULING in names else "off"
            if _POD_RESCHEDULING in names:
                labels[c.LABEL_POD_RESCHEDULING] = "on"
        elif key in _STRATEGY_KEYS and value:
            text = ",".join(value) if isinstance(value, list) else str(value)
            annotations[c.ANNOTATION_RECOVER_STRATEGY] = text
        elif key in _PLATFORM_KEYS and (key == c.ANNOTATION_PLATFORM_STRATEGY or str(value).lower() in _TRUE):
            annotations[c.ANNOTATION_PLATFORM_STRATEGY] = ""
    if not labels and not annotations and not any(k in pairs for k in _PLATFORM_KEYS):
        return None
    return {"labels": labels, "annotations": annotations}


def init_snapshot_of(event: dict[str, Any], received_at: datetime) -> InitSnapshot | None:
    """The snapshot an Event carries, or None for every other Event."""
    reason = str(event.get("reason", ""))
    if reason not in INIT_SNAPSHOT_REASONS:
        return None
    involved = event.get("involvedObject") or event.get("regarding") or {}
    namespace = str(involved.get("namespace") or (event.get("metadata") or {}).get("namespace", ""))
    name = str(involved.get("name", ""))
    if involved.get("kind") == c.PODGROUP_KIND:
        job_name, uid = split_uid_suffix(name)
        ref = JobRef(namespace, job_name, uid)
    elif involved.get("kind") == c.ASCENDJOB_KIND:
        ref = JobRef(namespace, name, str(involved.get("uid", "")))
    else:
        return None
    keys = snapshot_keys(str(event.get("message") or event.get("note") or ""))
    if keys is None:
        return None
    stamp = parse_k8s_time(
        event.get("eventTime") or event.get("firstTimestamp") or event.get("lastTimestamp")
    )
    return InitSnapshot(
        job=ref, keys=keys, at=best_time(stamp, received_at), accepted=reason not in REFUSED_INIT_REASONS
    )
