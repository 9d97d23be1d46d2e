"""A fresh ``migrate`` (the install's migration Job) has the built-in presets: no demo command needed."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.policies.builtin_presets import BUILTIN_PRESETS, PRESET_DESCRIPTIONS
from apps.policies.models import Preset

pytestmark = pytest.mark.django_db

BEFORE = ("policies", "0003_alter_policyrevision_source")
DATA_MIGRATION = ("policies", "0004_builtin_presets")


def migrate_to(target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([target])


def test_the_data_migration_creates_every_builtin_preset_and_leaves_user_presets_alone() -> None:
    migrate_to(BEFORE)  # reversing the data migration keeps the rows; start from none
    Preset.objects.all().delete()
    Preset.objects.create(name="mine", spec={"strategies": ["dump"]})
    Preset.objects.create(name="retry-first", spec={"strategies": []}, description="stale")

    migrate_to(DATA_MIGRATION)

    builtin = {p.name: p for p in Preset.objects.filter(builtin=True)}
    assert set(builtin) == set(BUILTIN_PRESETS)
    for name, preset in builtin.items():
        assert preset.spec == BUILTIN_PRESETS[name]
        assert preset.description == PRESET_DESCRIPTIONS[name]
    assert Preset.objects.get(name="mine").builtin is False


def test_the_migrated_test_database_already_has_them() -> None:
    """pytest-django builds the test database with ``migrate``: the same path as an install."""
    assert set(BUILTIN_PRESETS) <= set(Preset.objects.values_list("name", flat=True))
