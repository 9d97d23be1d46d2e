"""Model parts several apps declare the same way: a row's optional cluster scope, write-once rows,
the milliseconds between two of a row's timestamps.

Each is one field definition or one rule; the apps keep their own models and migrations (a field
made here is the same field Django would get from the inline ``models.ForeignKey(...)``, so no
migration changes).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from django.db import models

EVERY_CLUSTER = "Empty = every cluster"


def optional_cluster(*, related_name: str, help_text: str = EVERY_CLUSTER) -> models.ForeignKey[Any, Any]:
    """A row that applies to one cluster, or to every cluster when null (grants, webhooks, presets).

    Deleting the cluster deletes the row: a scope that names a cluster which is gone means nothing.
    """
    return models.ForeignKey(
        "jobs.Cluster",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name=related_name,
        help_text=help_text,
    )


class WriteOnceModel(models.Model):
    """A row saved once and never changed (revisions, the audit trail).

    History you cannot trust is worse than none: saving a stored row again raises ``ValueError``
    with ``rewrite_error``, so a bug cannot rewrite the past (a queryset ``update`` is the
    service's explicit choice, never an accident of ``save``).
    """

    rewrite_error: ClassVar[str]

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise ValueError(self.rewrite_error)
        super().save(*args, **kwargs)


def elapsed_ms(start: datetime, end: datetime | None) -> float | None:
    """Milliseconds from ``start`` to ``end``; None while ``end`` is not reached (not yet written)."""
    if end is None:
        return None
    return (end - start).total_seconds() * 1000
