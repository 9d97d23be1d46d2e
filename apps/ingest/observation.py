"""What a source saw, before it is a stored event: plain data, no ORM."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

# A Kubernetes uid (RFC 4122 text form), as the suffix of ``<job>-<uid>`` names.
_UID_SUFFIX = re.compile(
    r"^(?P<name>.+)-(?P<uid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$"
)
# Kubernetes timestamps have second precision; seen live, our receive time is the better clock.
LIVE_SKEW = timedelta(seconds=2)


@dataclass(frozen=True)
class JobRef:
    """Which job an observation is about: namespace and name, plus the uid when the source knows it."""

    namespace: str
    name: str = ""
    uid: str = ""


@dataclass(frozen=True)
class Observation:
    """One typed event candidate from one source."""

    job: JobRef
    kind: str
    message: str
    source: str
    data: dict[str, Any] = field(default_factory=dict)
    # Source identity (e.g. ``k8s-event:<uid>:<count>``); incident-scoped kinds get a semantic key
    # from the store instead, so two sources reporting the same happening store it once.
    dedupe_key: str = ""
    occurred_at: datetime | None = None
    severity: str = ""


def split_uid_suffix(name: str) -> tuple[str, str]:
    """``llama-<uid>`` → (``llama``, ``<uid>``); names without a uid suffix come back unchanged."""
    match = _UID_SUFFIX.match(name)
    if not match:
        return name, ""
    return match.group("name"), match.group("uid")


def best_time(source_time: datetime | None, received_at: datetime) -> datetime:
    """The source's own time when it is old (a replay), else our receive time (sub-second precision)."""
    if source_time is None:
        return received_at
    if received_at - source_time <= LIVE_SKEW and source_time <= received_at + LIVE_SKEW:
        return received_at
    return source_time
