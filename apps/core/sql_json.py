"""SQL expressions that make PostgreSQL write API output as DRF would (apps/api/jobs/list_rows.py, the
policy GET's latest push): a JSON object of named values, and a timestamp as DRF's ISO 8601 in UTC.
The callers' tests compare the database's output with the serializers' for every kind of value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections
from django.db.models import Expression, Func, TextField
from django.utils import timezone


def database_renders_datetimes() -> bool:
    """Whether this request's timestamps can be written by the database: PostgreSQL, and UTC as the
    current time zone (IsoUtc writes UTC; DRF writes the current zone)."""
    if connections["default"].vendor != "postgresql":
        return False
    return str(timezone.get_current_timezone()) == "UTC"  # ZoneInfo("UTC") and datetime.UTC alike


class JsonObject(Expression):
    """``json_build_object('key', value, ...)::text``: the keys written into the SQL (they are the
    serializer's field names, fixed here, never input), the values compiled as expressions."""

    output_field = TextField()

    def __init__(self, fields: dict[str, Any]) -> None:
        super().__init__()
        for key in fields:
            if not (key.isascii() and key.replace("_", "").isalpha() and key.islower()):
                raise ValueError(f"not a plain JSON key: {key!r}")
        self.fields = fields

    def get_source_expressions(self) -> list[Any]:
        return list(self.fields.values())

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        self.fields = dict(zip(self.fields, exprs, strict=True))

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        parts: list[str] = []
        params: list[Any] = []
        for key, expression in self.fields.items():
            sql, expression_params = compiler.compile(expression)
            parts.append(f"'{key}', {sql}")
            params.extend(expression_params)
        return f"json_build_object({', '.join(parts)})::text", tuple(params)


class IsoUtc(Func):
    """A timestamp as DRF renders it in UTC: 2026-12-07T20:34:39.268123Z, or ...:39Z on a whole second
    (``datetime.isoformat`` leaves out zero microseconds). One ``to_char`` and a ``replace`` of the
    only place ".000000Z" can be, its end: a second ``to_char`` to test the microseconds cost more."""

    output_field = TextField()
    template = (
        "replace(to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),"
        " '.000000Z', 'Z')"
    )
