"""A fresh ``migrate`` (the install's migration Job) has the built-in presets: no demo command needed."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.policies.builtin_presets import BUILTIN_PRESETS, PRESET_DESCRIPTIONS

pytestmark = pytest.mark.django_db

BEFORE = ("policies", "0001_initial")
DATA_MIGRATION = ("policies", "0002_builtin_presets")


def migrate_to(target: tuple[str, str]) -> Any:
    """Migrate the test database to ``target``; the Preset model as it was there."""
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    return executor.loader.project_state([target]).apps.get_model("policies", "Preset")


def latest_migration() -> tuple[str, str]:
    return next(iter(MigrationExecutor(connection).loader.graph.leaf_nodes("policies")))


@pytest.mark.django_db(transaction=True)  # migrations alter tables: not inside a test transaction
def test_the_data_migration_creates_every_builtin_preset_and_leaves_user_presets_alone() -> None:
    latest = latest_migration()
    try:
        old_preset = migrate_to(BEFORE)  # reversing the data migration keeps the rows; start from none
        old_preset.objects.all().delete()
        old_preset.objects.create(name="mine", spec={"strategies": ["dump"]})
        old_preset.objects.create(name="retry-first", spec={"strategies": []}, description="stale")

        preset = migrate_to(DATA_MIGRATION)

        builtin = {p.name: p for p in preset.objects.filter(builtin=True)}
        assert set(builtin) == set(BUILTIN_PRESETS)
        for name, row in builtin.items():
            assert row.spec == BUILTIN_PRESETS[name]
            assert row.description == PRESET_DESCRIPTIONS[name]
        assert preset.objects.get(name="mine").builtin is False
    finally:
        migrate_to(latest)  # the rest of the suite runs on the current schema


def test_a_fresh_migrate_runs_the_data_migration() -> None:
    """The plan of a plain ``migrate`` (the install's migration Job) includes the data migration. (Not
    checked by reading the test database's rows: a transactional test run earlier in this process
    empties every table. The rehearsal's fresh install checks the rows, tests/ship.)"""
    graph = MigrationExecutor(connection).loader.graph
    assert DATA_MIGRATION in graph.forwards_plan(latest_migration())
