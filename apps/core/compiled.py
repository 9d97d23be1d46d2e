"""Querysets of a fixed shape compiled to SQL once per process, then run with new parameters.

Django compiles a queryset to SQL on every evaluation. For the lookups every API request makes (its
token, its job with cluster and revision) compiling cost more than running: bench/profile_api.py
measured ~0.4 ms to compile the token lookup and ~0.7 ms the job's, against ~0.2 ms to run either.
``CompiledQuery`` compiles its queryset once with marker arguments, remembers the SQL and where each
marker landed among the parameters, and then runs that SQL with the real arguments through Django's
own compiler and model iterable (so ``select_related`` objects, converters and ``from_db`` are
Django's). A shape whose markers do not all appear among the parameters falls back to compiling every time.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar, cast

from django.db import connections
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

R = TypeVar("R")  # what a row becomes: a model instance, or a values_list tuple


def _marker(index: int, kind: type, variant: int) -> Any:
    """A parameter value no caller passes, valid for the column it is compared with.

    Strings mix cases, so a build that changes its argument (``name.lower()``) loses the marker and
    falls back instead of binding the untransformed value. Integers are positive and within 32 bits:
    Django drops a comparison with a value outside the column's range from the SQL (it can match
    nothing), and a query compiled without it would be wrong for every real argument. So int
    arguments are meant for ids (primary and foreign keys).
    """
    return f"\x00Compiled-{variant}-{index}\x00" if kind is str else 2_147_480_000 + 2 * index + variant


class CompiledQuery(Generic[R]):
    """``build(*args)`` evaluated as a list, its SQL compiled once per database vendor."""

    def __init__(self, build: Callable[..., QuerySet[Any, R]], *kinds: type) -> None:
        self._build = build
        self._kinds = kinds  # str or int, per argument
        self._lock = threading.Lock()
        self._compiled: dict[str, Any] = {}

    def __call__(self, *args: Any) -> list[R]:
        connection = connections["default"]
        template = self._compiled.get(connection.vendor)
        if template is None:
            with self._lock:
                template = self._compiled.setdefault(connection.vendor, self._compile())
        if template is False:
            return list(self._build(*args))  # a shape this cannot bind: compiled every time, as Django does
        queryset, compiler_template, sql, slots, constants = template
        params = list(constants)
        for position, argument in slots:
            params[position] = args[argument]
        return _run(queryset, compiler_template, sql, params)

    def _compile(self) -> Any:
        """The template, or False when the arguments do not go into the parameters unchanged: two
        compilations with different markers must give the same SQL and differ exactly where the
        markers are (an argument that changes the query's shape, or is transformed, fails this)."""
        compiled = []
        for variant in (0, 1):
            markers = [_marker(i, kind, variant) for i, kind in enumerate(self._kinds)]
            queryset = self._build(*markers)
            if queryset.db != "default":
                return False
            compiler = queryset.query.get_compiler(using=queryset.db)
            sql, params = compiler.as_sql()
            compiled.append((queryset, compiler, sql, list(params), markers))
        (queryset, compiler, sql, params, markers), (_, _, other_sql, other_params, _) = compiled
        if sql != other_sql or len(params) != len(other_params):
            return False
        slots: list[tuple[int, int]] = []
        for position, (value, other) in enumerate(zip(params, other_params, strict=True)):
            if value == other:
                continue
            if value not in markers:
                return False
            slots.append((position, markers.index(value)))
        if {argument for _, argument in slots} != set(range(len(markers))):
            return False
        return queryset, compiler, sql, slots, params


def _converters_of(compiler_template: Any) -> Callable[[list[Any]], dict[int, Any]]:
    """``get_converters`` for the compiled columns, worked out once per template.

    Django asks every column of every row set for its converters on each execution (one backend and
    one field lookup per column): for the job detail's three compiled queries that was a tenth of its
    CPU (bench/profile_api.py). The columns of a template never change, and the converters found are
    plain functions of the value, the column and the connection passed at each call, so they are
    kept; any other list of expressions is worked out as Django does.
    """
    cached = getattr(compiler_template, "_compiled_converters", None)
    if cached is not None:
        return cast(Callable[[list[Any]], dict[int, Any]], cached)
    columns = [selected[0] for selected in compiler_template.select[0 : compiler_template.col_count]]
    converters = compiler_template.get_converters(columns)
    work_out = compiler_template.get_converters

    def get_converters(expressions: list[Any]) -> dict[int, Any]:
        same = len(expressions) == len(columns)
        if same and all(a is b for a, b in zip(expressions, columns, strict=True)):
            return converters
        return cast(dict[int, Any], work_out(expressions))

    compiler_template._compiled_converters = get_converters
    return get_converters


def _run(queryset: Any, compiler_template: Any, sql: str, params: list[Any]) -> list[R]:
    """``queryset`` evaluated with ``sql`` and ``params`` in place of compiling it (``compiler_template``:
    its compiler after compiling, so the selected columns and their converters are known)."""
    compiler = copy.copy(compiler_template)
    compiler.connection = connections["default"]  # this thread's connection, not the compiling thread's
    compiler.as_sql = lambda *_, **__: (sql, tuple(params))
    compiler.get_converters = _converters_of(compiler_template)
    query = copy.copy(compiler.query)
    query.get_compiler = lambda *_, **__: compiler  # ModelIterable asks the query for its compiler
    run: QuerySet[Any, R] = queryset._chain()
    iterable = run._iterable_class
    run.query = query  # the setter would make a values_list query yield dicts: keep its iterable
    run._iterable_class = iterable
    return list(run)


def _sql_of(queryset: QuerySet[Any, Any]) -> tuple[str, list[Any]]:
    sql, params = queryset.query.sql_with_params()
    return sql, list(params)


def _check_window(subquery: QuerySet[Any, Any], window: slice | None) -> None:
    if window is not None and (subquery.query.is_sliced or window.step is not None or window.stop is None):
        raise ValueError("window: the subquery unsliced, and a slice with an end and no step")


# Subqueries kept per AroundSubquery (``keyed``): a few hundred bytes of SQL and parameters each.
KEPT_SUBQUERIES = 4_096

# Stand for the subqueries in an ``AroundSubquery`` template: literals no real query contains.
_SUBQUERY_SENTINEL = "SELECT '\x00compiled-subquery\x00'"
_WHOLE_SENTINEL = "SELECT '\x00compiled-whole\x00'"


class AroundSubquery(Generic[R]):
    """``build(shape, subquery)`` evaluated as a list, compiled once per ``shape`` but for the subquery.

    For a query whose variable part is one subquery (the jobs list: its page's rows, ``pk__in`` the
    page's ids under any filter and visibility): the outer query, with its joins and columns, is
    compiled once per shape (bench/profile_api.py: ~0.7 ms a page), the subquery every time. A
    shape whose outer query has parameters of its own is compiled every time (their places among
    the subquery's are not known).

    With ``whole=True`` the build takes a third argument, ``(sql, params)`` of a second subquery that
    goes into the outer query as raw SQL (the jobs list counts the whole list there): the caller's
    ``whole`` queryset, compiled every time like the first.
    """

    def __init__(self, build: Callable[..., QuerySet[Any, R]], *, whole: bool = False) -> None:
        self._build = build
        self._whole = whole
        self._lock = threading.Lock()
        self._compiled: dict[tuple[str, Hashable], Any] = {}
        self._kept: OrderedDict[tuple[str, Hashable, Hashable], Any] = OrderedDict()

    def __call__(
        self,
        shape: Hashable,
        subquery: QuerySet[Any, Any],
        window: slice | None = None,
        whole: QuerySet[Any, Any] | None = None,
    ) -> list[R]:
        """``window``: the slice of ``subquery`` (unsliced then) to take, bound as parameters: Django
        writes a slice into the SQL as literals, so each page would be a statement of its own that
        PostgreSQL plans every time; bound, every page of a shape is one prepared statement
        (bench/profile_api.py: a random page of 10,000 jobs 1.7 -> 0.7 ms of PostgreSQL's CPU)."""
        if (whole is None) == self._whole:
            raise ValueError("whole: given exactly when the query was built with whole=True")
        _check_window(subquery, window)
        template = self._template(shape)
        if template is False:
            return self._compiled_every_time(shape, subquery, window, whole)
        inner = _sql_of(subquery)
        return self._fill(template, inner, window, None if whole is None else _sql_of(whole))

    def keyed(
        self,
        shape: Hashable,
        key: Hashable,
        subqueries: Callable[[], tuple[QuerySet[Any, Any], QuerySet[Any, Any] | None]],
        window: slice | None = None,
    ) -> list[R]:
        """A call whose subqueries' SQL is kept too, per ``(shape, key)``: ``subqueries()`` (the
        subquery and the whole, as a call takes them) is built and compiled only for a pair not kept.

        ``key`` must decide the subqueries: equal keys, equal SQL and parameters (the jobs list: its
        order and the user's visibility, bench/profile_api.py: building the visibility filter and
        compiling both subqueries was about a third of a page's CPU). At most ``KEPT_SUBQUERIES``
        pairs are kept, the least recently used dropped first."""
        template = self._template(shape)
        if template is False:
            subquery, whole = subqueries()
            return self._compiled_every_time(shape, subquery, window, whole)
        kept_key = (connections["default"].vendor, shape, key)
        with self._lock:
            kept = self._kept.get(kept_key)
            if kept is not None:
                self._kept.move_to_end(kept_key)
        if kept is None:
            subquery, whole = subqueries()
            if (whole is None) == self._whole:
                raise ValueError("whole: given exactly when the query was built with whole=True")
            _check_window(subquery, window)
            kept = (_sql_of(subquery), None if whole is None else _sql_of(whole))
            with self._lock:
                self._kept[kept_key] = kept
                while len(self._kept) > KEPT_SUBQUERIES:
                    self._kept.popitem(last=False)
        return self._fill(template, kept[0], window, kept[1])

    def _template(self, shape: Hashable) -> Any:
        key = (connections["default"].vendor, shape)
        template = self._compiled.get(key)
        if template is None:
            with self._lock:
                template = self._compiled.setdefault(key, self._compile(shape))
        return template

    def _compiled_every_time(
        self,
        shape: Hashable,
        subquery: QuerySet[Any, Any],
        window: slice | None,
        whole: QuerySet[Any, Any] | None,
    ) -> list[R]:
        args: list[Any] = [subquery if window is None else subquery[window]]
        if whole is not None:
            args.append(whole.query.sql_with_params())
        return list(self._build(shape, *args))

    def _fill(
        self,
        template: Any,
        inner: tuple[str, list[Any]],
        window: slice | None,
        whole: tuple[str, list[Any]] | None,
    ) -> list[R]:
        queryset, compiler_template, parts, kinds = template
        inner_sql, page_params = inner[0], list(inner[1])
        if window is not None:
            start = window.start or 0
            inner_sql += " LIMIT %s OFFSET %s"
            page_params += [max(0, window.stop - start), start]
        filled = {_SUBQUERY_SENTINEL: (inner_sql, page_params)}
        if whole is not None:
            filled[_WHOLE_SENTINEL] = whole
        sql = parts[0]
        params: list[Any] = []
        for kind, after in zip(kinds, parts[1:], strict=True):
            sql += filled[kind][0] + after
            params += filled[kind][1]
        return _run(queryset, compiler_template, sql, params)

    def _compile(self, shape: Hashable) -> Any:
        args: list[Any] = [RawSQL(_SUBQUERY_SENTINEL, ())]
        if self._whole:
            args.append((_WHOLE_SENTINEL, ()))
        queryset = self._build(shape, *args)
        if queryset.db != "default":
            return False
        compiler = queryset.query.get_compiler(using=queryset.db)
        sql, params = compiler.as_sql()
        sentinels = [_SUBQUERY_SENTINEL, _WHOLE_SENTINEL] if self._whole else [_SUBQUERY_SENTINEL]
        if params or any(sql.count(sentinel) != 1 for sentinel in sentinels):
            return False
        # The template's pieces between the sentinels, and which sentinel each gap was.
        found = sorted((sql.index(sentinel), sentinel) for sentinel in sentinels)
        parts: list[str] = []
        kinds: list[str] = []
        begin = 0
        for position, sentinel in found:
            parts.append(sql[begin:position])
            kinds.append(sentinel)
            begin = position + len(sentinel)
        parts.append(sql[begin:])
        return queryset, compiler, parts, kinds
