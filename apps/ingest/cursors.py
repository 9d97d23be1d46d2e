"""Each watched stream's cursor: the newest resourceVersion whose events are all stored."""

from __future__ import annotations

from apps.events.models import IngestCursor
from apps.jobs.models import Cluster


def cursor_load(cluster: Cluster, source: str) -> str:
    row = IngestCursor.objects.filter(cluster=cluster, source=source).first()
    return row.resource_version if row else ""


def cursor_save(cluster: Cluster, source: str, resource_version: str) -> None:
    IngestCursor.objects.update_or_create(
        cluster=cluster, source=source, defaults={"resource_version": resource_version}
    )
