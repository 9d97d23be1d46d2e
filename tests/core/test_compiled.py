"""``CompiledQuery`` (apps/core/compiled.py) answers exactly what its queryset answers.

Compiled once, run with new arguments: the rows, the ``select_related`` objects and the values_list
tuples must be the ORM's for every argument, in any thread, and a shape whose arguments it cannot
place must still be answered (by compiling every time).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connection, connections
from django.db.models import QuerySet
from django.test.utils import CaptureQueriesContext

from apps.accounts.models import ApiToken
from apps.accounts.selectors import grant_rows, grants_of
from apps.core.compiled import AroundSubquery, CompiledQuery
from apps.jobs.models import TrainingJob
from tests.support.world import World, training_job

pytestmark = pytest.mark.django_db


def _job_fields(job: TrainingJob) -> tuple[object, ...]:
    revision = job.current_revision
    return (
        job.pk,
        job.name,
        job.replicas,
        job.created_at,
        job.cluster.name,
        revision.number if revision else None,
        revision.spec if revision else None,
    )


JOBS = CompiledQuery(
    lambda pk: TrainingJob.objects.select_related("cluster", "current_revision").filter(pk=pk)[:1], int
)


def test_model_rows_with_their_related_objects_are_the_orms(world: World) -> None:
    for job in (world.job, world.other_job, training_job(world.cluster, "third")):
        orm = TrainingJob.objects.select_related("cluster", "current_revision").get(pk=job.pk)
        with CaptureQueriesContext(connection) as queries:
            (compiled,) = JOBS(job.pk)
            assert _job_fields(compiled) == _job_fields(orm)
        assert len(queries) == 1  # the related objects came with the row
    assert JOBS(10**12) == []


def test_values_list_rows_and_repeated_arguments(world: World) -> None:
    for name in ("owner", "teammate", "admin", "outsider"):
        user = world.users[name]
        expected = sorted(grants_of(user).values_list("cluster_id", "namespace", "role"), key=str)
        assert sorted(grant_rows(user), key=str) == expected  # the user id is bound twice (user, group)


def test_a_token_by_its_hash(world: World) -> None:
    from apps.accounts.authentication import TokenAuthentication

    key = world.keys["teammate"]
    user, token = TokenAuthentication().authenticate_key(key)
    assert (user, token.user) == (world.users["teammate"], world.users["teammate"])
    assert token == ApiToken.objects.get(pk=token.pk)


def test_an_argument_it_cannot_place_is_compiled_every_time(world: World) -> None:
    by_upper_name = CompiledQuery(lambda name: TrainingJob.objects.filter(name=name.lower()), str)
    assert [job.pk for job in by_upper_name(world.job.name.upper())] == [world.job.pk]
    assert by_upper_name("NO-SUCH-JOB") == []


@pytest.mark.django_db(transaction=True)
def test_threads_each_get_their_own_rows(world: World) -> None:
    jobs = [training_job(world.cluster, f"threaded-{i}") for i in range(16)]

    def read(job: TrainingJob) -> int:
        try:
            return JOBS(job.pk)[0].pk
        finally:
            connections.close_all()

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(read, jobs * 4)) == [job.pk for job in jobs * 4]


def _rows_by(order: tuple[str, ...], ids: object) -> QuerySet[TrainingJob, dict[str, object]]:
    return (
        TrainingJob.objects.filter(pk__in=ids)
        .order_by(*order)
        .values("id", "name", "cluster__name", "replicas")
    )


PAGE = AroundSubquery(_rows_by)


def test_rows_around_a_subquery_are_the_orms_for_each_shape_and_subquery(world: World) -> None:
    for i in range(5):
        training_job(world.cluster, f"paged-{i}")
    jobs = TrainingJob.objects.order_by("name", "id")
    for order in (("name", "id"), ("-name", "id"), ("-id",)):
        for ids in (jobs.values("pk")[1:4], jobs.filter(name__startswith="paged-").values("pk")[:2]):
            with CaptureQueriesContext(connection) as queries:
                rows = PAGE(order, ids)
            assert rows == list(_rows_by(order, ids))
            assert len(queries) == 1  # the subquery went into the one query
    assert PAGE(("id",), jobs.filter(name="no-such-job").values("pk")) == []


def test_a_window_of_the_subquery_is_the_orms_slice_and_one_statement_for_every_page(world: World) -> None:
    """The page's LIMIT and OFFSET are parameters, so every page of a shape is the same statement
    (prepared once per connection by PostgreSQL) and gives the rows the ORM's slice gives."""
    for i in range(7):
        training_job(world.cluster, f"windowed-{i}")
    jobs = TrainingJob.objects.order_by("name", "id")
    ids = jobs.values("pk")
    statements: list[str] = []

    def sent(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements.append(sql)  # as handed to the driver: placeholders, parameters apart
        return execute(sql, params, many, context)

    for window in (slice(0, 3), slice(2, 5), slice(6, 50), slice(40, 50), slice(4, 4)):
        with connection.execute_wrapper(sent):
            rows = PAGE(("name", "id"), ids, window)
        assert rows == list(_rows_by(("name", "id"), ids[window])), window
    assert len(statements) == 5
    assert len(set(statements)) == 1
    with pytest.raises(ValueError, match="unsliced"):
        PAGE(("id",), ids[:2], slice(0, 1))


def test_an_outer_query_with_parameters_of_its_own_is_compiled_every_time(world: World) -> None:
    by_name = AroundSubquery(lambda name, ids: TrainingJob.objects.filter(pk__in=ids, name=name).values("id"))
    all_ids = TrainingJob.objects.values("pk")
    assert by_name(world.job.name, all_ids) == [{"id": world.job.pk}]
    assert by_name("no-such-job", all_ids) == []


def test_converters_are_worked_out_once_and_still_applied(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A template's column converters are found once (its columns never change), yet every run's
    values still go through them: the JSON spec decoded, the datetime aware, as the ORM gives them."""
    from django.db.models.sql.compiler import SQLCompiler

    asked: list[int] = []
    real = SQLCompiler.get_converters

    def counting(self: SQLCompiler, expressions: list[object]) -> dict[int, object]:
        asked.append(len(expressions))
        return real(self, expressions)

    monkeypatch.setattr(SQLCompiler, "get_converters", counting)
    shape = CompiledQuery(
        lambda pk: TrainingJob.objects.select_related("cluster", "current_revision").filter(pk=pk)[:1], int
    )
    for _ in range(3):
        for job in (world.job, world.other_job):
            orm = TrainingJob.objects.select_related("cluster", "current_revision").get(pk=job.pk)
            (compiled,) = shape(job.pk)
            assert _job_fields(compiled) == _job_fields(orm)
            assert compiled.created_at.tzinfo is not None
    orm_runs = 6  # each ORM .get() above asks once
    assert len(asked) == orm_runs + 1


def test_kept_subqueries_are_built_once_per_shape_and_key_and_answer_as_a_call(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``keyed``: the subqueries' SQL kept per (shape, key), the rows those of a call with the same
    subqueries; a new key builds again; the least recently used pair goes first."""
    import apps.core.compiled as compiled

    for i in range(6):
        training_job(world.cluster, f"kept-{i}")
    page = AroundSubquery(_rows_by)
    built: list[str] = []

    def subqueries(prefix: str) -> Any:
        def build() -> tuple[QuerySet[Any, Any], None]:
            built.append(prefix)
            ids = TrainingJob.objects.filter(name__startswith=prefix).order_by("name", "id").values("pk")
            return ids, None

        return build

    for window in (slice(0, 2), slice(1, 4), slice(3, 9)):
        for prefix in ("kept-", "kept-1", "paged-"):
            expected = page(("name", "id"), subqueries(prefix)()[0], window)
            assert page.keyed(("name", "id"), prefix, subqueries(prefix), window) == expected
    assert built == ["kept-", "kept-", "kept-1", "kept-1", "paged-", "paged-"] + [
        p for _ in range(2) for p in ("kept-", "kept-1", "paged-")
    ]  # each key built once by keyed (the others are the expected's own calls)
    monkeypatch.setattr(compiled, "KEPT_SUBQUERIES", 2)
    built.clear()
    for prefix in ("kept-3", "paged-", "kept-1", "paged-", "kept-3"):  # two kept: paged- stays in use
        page.keyed(("name", "id"), prefix, subqueries(prefix), slice(0, 5))
    assert built == ["kept-3", "kept-1", "kept-3"]
