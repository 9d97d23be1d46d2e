"""What the ingester's watchers hand its applier: one ``Item`` per watch event, list entry or signal."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apps.cluster.watch import WatchTarget
from apps.jobs.models import Cluster
from mindcluster import keys as c

CLUSTERD_SOURCE = "clusterd"
BOOKMARK = "BOOKMARK"
# The end of a (re)list: a bookmark at the list's version that also names every object listed, so
# the store can tell what disappeared while nobody watched.
LISTED = "LISTED"
SIGNAL = "SIGNAL"


def source_of(target: WatchTarget) -> str:
    """The name of one watched stream: its cursor's key (``IngestCursor.source``) and its watermark's."""
    where = target.namespace or "*"
    return f"{target.resource}:{where}" + (f":{target.field_selector}" if target.field_selector else "")


def watch_targets(cluster: Cluster) -> list[WatchTarget]:
    """What to watch in ``cluster``: its namespaces (or all), plus ``mindx-dl``'s reschedule record."""
    namespaces: list[str | None] = list(cluster.namespaces) or [None]
    targets = [
        WatchTarget(resource, ns)
        for resource in ("ascendjobs", "podgroups", "configmaps", "events")
        for ns in namespaces
    ]
    if namespaces != [None] and c.MINDX_NAMESPACE not in namespaces:
        targets.append(
            WatchTarget("configmaps", c.MINDX_NAMESPACE, f"metadata.name={c.RESCHEDULE_REASON_CONFIGMAP}")
        )
    return targets


def sources_of(cluster: Cluster) -> set[str]:
    return {source_of(target) for target in watch_targets(cluster)}


@dataclass(frozen=True)
class Listing:
    """What a (re)list of one stream found: the objects' (namespace, name), in ``namespace`` (None: all)."""

    namespace: str | None
    present: frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Item:
    """A unit of work for the applier.

    ``resource_version`` is the stream position the item stands for: a watch event's or bookmark's
    version, the server's version when a ClusterD signal arrived, and "" for a listed object (a
    listed object's own version is not a position in any stream).
    """

    source: str
    resource: str  # a watched resource, or CLUSTERD_SOURCE
    event_type: str
    obj: Any
    resource_version: str
    received_at: datetime

    @property
    def is_signal(self) -> bool:
        return self.resource == CLUSTERD_SOURCE
