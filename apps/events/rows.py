"""Single-statement writes of the event store that the ORM spells as two or three round trips.

A fault storm is paced by the ingester's statements, and by the Python that builds them (issue #27):
the ORM compiles every queryset anew, and "does it exist? then insert" is two statements where one
``INSERT ... ON CONFLICT`` says both. Each function here is one statement, portable to PostgreSQL and
SQLite (3.35+: ``RETURNING``), its values prepared by the model's own fields (JSON, datetimes).

All of them run under the caller's transaction; the ``FOR UPDATE`` ones hold their lock until it ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Field, Model
from django.utils import timezone

from apps.events.models import JobEvent, ObservedObject, SourceKey
from apps.jobs.models import TrainingJob

M = TypeVar("M", bound=Model)
# Per (model, database vendor): (column index, its converters, its column expression) for each column
# whose value the database returns in another form than the field's (JSON as text, SQLite's dates).
_CONVERTERS: dict[tuple[type[Model], str], list[tuple[int, list[Callable[..., Any]], Any]]] = {}


def columns(model: type[Model]) -> str:
    """The model's columns in its own field order, for ``SELECT`` and ``RETURNING``."""
    table = model._meta.db_table
    return ", ".join(f"{table}.{connection.ops.quote_name(str(field.column))}" for field in _fields(model))


def _fields(model: type[Model]) -> list[Field[Any, Any]]:
    return list(model._meta.concrete_fields)


def _converters(model: type[Model]) -> list[tuple[int, list[Callable[..., Any]], Any]]:
    """What Django's compiler applies to each selected column of ``model`` (``get_converters``)."""
    key = (model, connection.vendor)
    if key not in _CONVERTERS:
        found = []
        for index, field in enumerate(_fields(model)):
            column = field.get_col(model._meta.db_table)
            functions = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            if functions:
                found.append((index, functions, column))
        _CONVERTERS[key] = found
    return _CONVERTERS[key]


def models_of(model: type[M], sql: str, params: list[Any]) -> list[M]:
    """The rows ``sql`` returns as instances of ``model``; it selects ``columns(model)``.

    What ``model.objects.raw`` gives, without its setup on every call (it introspects the cursor's
    columns and plans the model's construction anew: about 0.1 ms a query, several per fault).
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    names = [field.attname for field in _fields(model)]
    converters = _converters(model)
    instances = []
    for row in found:
        values = list(row)
        for index, functions, column in converters:
            for convert in functions:
                values[index] = convert(values[index], column, connection)
        instances.append(model.from_db(connection.alias, names, values))
    return instances


def _prepared(model: type[Model], values: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """The quoted columns of ``values`` (by field name) and their values as the fields store them."""
    columns: list[str] = []
    params: list[Any] = []
    for name, value in values.items():
        field = model._meta.get_field(name)
        assert isinstance(field, Field)  # a concrete column, not a reverse relation
        columns.append(connection.ops.quote_name(str(field.column)))
        params.append(field.get_db_prep_save(value, connection))
    return columns, params


def _insert(model: type[Model], values: dict[str, Any]) -> tuple[str, list[Any]]:
    """``INSERT INTO <table> (<columns>) VALUES (<placeholders>)`` of one row, and its parameters."""
    columns, params = _prepared(model, values)
    placeholders = ", ".join(["%s"] * len(params))
    return f"INSERT INTO {model._meta.db_table} ({', '.join(columns)}) VALUES ({placeholders})", params


def job_lock(job_id: int) -> None:
    """Lock the job row until the end of the current transaction (the per-job writer lock)."""
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {TrainingJob._meta.db_table} WHERE id = %s{lock}", [job_id])
        if cursor.fetchone() is None:
            raise TrainingJob.DoesNotExist(f"job {job_id} is gone")


def source_key_remember(job_id: int, key: str) -> bool:
    """Note that the source record ``key`` was handled; False when it already was (a replay)."""
    insert, params = _insert(SourceKey, {"job": job_id, "key": key[:200], "created_at": timezone.now()})
    with connection.cursor() as cursor:
        cursor.execute(f"{insert} ON CONFLICT (job_id, key) DO NOTHING RETURNING id", params)
        return cursor.fetchone() is not None


def event_insert(job: TrainingJob, **values: Any) -> JobEvent | None:
    """Store one event of ``job`` as its next ``seq``; None when its ``dedupe_key`` is stored already.

    The seq is read in the insert itself (the job's lock is held: no other writer can take it), and
    a duplicate key is skipped by the insert (``ON CONFLICT`` on the partial unique index), so the
    event costs one statement instead of a seq read, a key check and the insert.
    """
    values = {**values, "dedupe_key": str(values.get("dedupe_key") or "")[:200], "stored_at": timezone.now()}
    columns, params = _prepared(JobEvent, {"job": job.pk, **values})
    table = JobEvent._meta.db_table
    sql = (
        f"INSERT INTO {table} (seq, {', '.join(columns)}) "
        f"SELECT COALESCE(MAX(seq), 0) + 1, {', '.join(['%s'] * len(params))} FROM {table} WHERE job_id = %s "
        "ON CONFLICT (job_id, dedupe_key) WHERE NOT dedupe_key = '' DO NOTHING RETURNING id, seq"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, job.pk])
        row = cursor.fetchone()
    if row is None:
        return None
    event = JobEvent(id=row[0], job=job, seq=row[1], **values)
    event._state.adding = False
    event._state.db = connection.alias
    return event


def observed_lock(cluster_id: int, kind: str, namespace: str, name: str) -> ObservedObject:
    """The state row of one cluster object, created on first sight, locked until the transaction ends.

    One upsert: a new row is inserted (and so held), an existing one is locked by its no-op update
    (``DO UPDATE`` waits for another writer's lock as ``SELECT ... FOR UPDATE`` would, then returns
    the row as that writer committed it).
    """
    identity = {"cluster": cluster_id, "kind": kind, "namespace": namespace, "name": name}
    fresh = {"uid": "", "resource_version": "", "state": {}, "updated_at": timezone.now()}
    insert, params = _insert(ObservedObject, {**identity, **fresh})
    table = ObservedObject._meta.db_table
    sql = (
        f"{insert} ON CONFLICT (cluster_id, kind, namespace, name) "
        f"DO UPDATE SET updated_at = {table}.updated_at RETURNING {columns(ObservedObject)}"
    )
    return models_of(ObservedObject, sql, params)[0]


def observed_save(observed: ObservedObject, *names: str) -> None:
    """``observed.save(update_fields=names)`` as one plain UPDATE (nothing listens to these rows)."""
    observed.updated_at = timezone.now()
    fields = [*names, "updated_at"]
    assignments, params = _prepared(ObservedObject, {name: getattr(observed, name) for name in fields})
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {ObservedObject._meta.db_table} SET {', '.join(f'{c} = %s' for c in assignments)} "
            "WHERE id = %s",
            [*params, observed.pk],
        )
