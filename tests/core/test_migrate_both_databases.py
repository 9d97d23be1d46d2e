"""A fresh ``migrate`` works on both databases the product runs on: PostgreSQL (production, tests) and
SQLite (the embedded default of ``bootstrap.py run``). The jobs list's "newest first, empty last"
indexes need ``NULLS LAST`` on PostgreSQL, and SQLite's CREATE INDEX refuses the clause (a first
``migrate`` of the embedded default failed with "unsupported use of NULLS LAST")."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from django.db import connection

from tests.support.processes import python_in_repo

DESC_INDEXES = ("job_live_by_last_fault_desc", "job_live_by_could_save_desc")


@pytest.mark.slow(seconds=8)
def test_a_fresh_sqlite_database_migrates_with_the_same_order(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db}",
        "DJANGO_SETTINGS_MODULE": "controlplane.settings.dev",
    }
    done = python_in_repo(["manage.py", "migrate", "--no-input"], env, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    with sqlite3.connect(db) as conn:
        sql = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").fetchall())
    for name in DESC_INDEXES:
        # SQLite sorts NULLs lowest: DESC alone puts them last, as NULLS LAST does on PostgreSQL.
        assert " DESC" in sql[name] and "NULLS" not in sql[name], sql[name]
    # The fleet counts' unique index has INCLUDE columns, which SQLite cannot build (Django leaves
    # it out), so their upsert cannot use ON CONFLICT there: adding twice must sum, not fail.
    added = python_in_repo(["manage.py", "shell", "-c", FLEET_COUNTS_TWICE], env, timeout=120)
    assert added.returncode == 0, added.stderr[-2000:]
    assert added.stdout.split()[-1] == "[('d',5),('w',5)]", added.stdout[-500:]


FLEET_COUNTS_TWICE = """
from collections import Counter
from datetime import date
from django.db import transaction
from apps.fleet import counts
from apps.fleet.figures import Tally
from apps.fleet.models import NamespaceCount
from apps.jobs.models import Cluster
cluster = Cluster.objects.create(name="lite", kubeconfig_path="/dev/null")
for n in (2, 3):
    with transaction.atomic():
        counts.add(cluster.pk, "team", date(2026, 12, 2), Tally(by_kind=Counter({"uce": n})))
rows = NamespaceCount.objects.filter(measure="kind", item="uce").order_by("span")
print(str([(row.span, row.count) for row in rows]).replace(" ", ""))
"""


@pytest.mark.django_db
def test_postgresql_keeps_the_empty_figures_last_in_the_descending_indexes() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY(%s)", [list(DESC_INDEXES)]
        )
        found = dict(cursor.fetchall())
    assert set(found) == set(DESC_INDEXES)
    for definition in found.values():
        assert "DESC NULLS LAST" in definition, definition
