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
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from django.db import connections
from django.db.models import QuerySet

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
        compiler = copy.copy(compiler_template)
        compiler.connection = connection  # this thread's connection, not the compiling thread's
        compiler.as_sql = lambda *_, **__: (sql, tuple(params))
        query = copy.copy(compiler.query)
        query.get_compiler = lambda *_, **__: compiler  # ModelIterable asks the query for its compiler
        run: QuerySet[Any, R] = queryset._chain()
        iterable = run._iterable_class
        run.query = query  # the setter would make a values_list query yield dicts: keep its iterable
        run._iterable_class = iterable
        return list(run)

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
