"""Model parts several apps declare the same way: a row's optional cluster scope, write-once rows,
the milliseconds between two of a row's timestamps, an index with NULLS LAST keys on both databases.

Each is one field definition or one rule; the apps keep their own models and migrations (a field
made here is the same field Django would get from the inline ``models.ForeignKey(...)``, so no
migration changes).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from django.db import models
from django.db.backends.ddl_references import Reference

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


class NullsLastIndex(models.Index):
    """An index whose ``desc(nulls_last=True)`` keys work on PostgreSQL and SQLite alike.

    PostgreSQL sorts NULLs as the largest values, so DESC alone would put them first: the index says
    NULLS LAST. SQLite sorts them as the smallest, so its DESC already puts them last, and its CREATE
    INDEX takes no NULLS clause ("unsupported use of NULLS LAST": the embedded default's ``migrate``
    failed on it); there the clause is dropped, the order is the same.
    """

    def create_sql(self, model: Any, schema_editor: Any, using: str = "", **kwargs: Any) -> Any:
        statement = super().create_sql(model, schema_editor, using=using, **kwargs)
        if schema_editor.connection.vendor == "sqlite":
            parts: dict[str, Any] = statement.parts  # (django-stubs types every part as a Table)
            parts["columns"] = _WithoutNullsClause(parts["columns"])
        return statement


class _WithoutNullsClause(Reference):
    """An index's column list without its NULLS clauses, still a reference: SQLite rebuilds a table
    under a temporary name and renames the references of its deferred index statements."""

    def __init__(self, part: Reference) -> None:
        self.part = part

    def references_table(self, table: str) -> bool:
        return bool(self.part.references_table(table))

    def references_column(self, table: str, column: str) -> bool:
        return bool(self.part.references_column(table, column))

    def rename_table_references(self, old_table: str, new_table: str) -> None:
        self.part.rename_table_references(old_table, new_table)

    def rename_column_references(self, table: str, old_column: str, new_column: str) -> None:
        self.part.rename_column_references(table, old_column, new_column)

    def __str__(self) -> str:
        return str(self.part).replace(" NULLS LAST", "")
