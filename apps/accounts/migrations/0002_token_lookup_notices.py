"""Announce every change the API token lookup depends on: ``NOTIFY controlplane_auth`` from statement
triggers on tokens, users, grants, group memberships and groups (apps/accounts/token_cache.py says
how the web processes use it).

The notice is sent when the writing transaction commits (PostgreSQL holds it until then, and sends
one per transaction however many statements fired), whatever wrote: the ORM, a bulk update, the
admin, psql. Updates that touch only ``last_used_at`` (the lookup's own bookkeeping, at most once a
minute per token) or ``last_login`` (a sign-in) are not announced: the lookup's verdict does not read
them. tests/accounts/test_token_cache.py checks that every other column is covered, so a column
added later cannot be forgotten here. SQLite has no notices (and keeps no copies).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

from apps.core.migration_steps import on_postgresql

FUNCTION = "accounts_token_lookup_changed"
CHANNEL = "controlplane_auth"

# Table -> the columns whose update is announced (None: every update).
WATCHED: dict[str, tuple[str, ...] | None] = {
    "accounts_apitoken": (
        "id",
        "name",
        "user_id",
        "prefix",
        "key_hash",
        "created_at",
        "expires_at",
        "revoked_at",
        "parent_id",
    ),
    "auth_user": (
        "id",
        "password",
        "is_superuser",
        "username",
        "first_name",
        "last_name",
        "email",
        "is_staff",
        "is_active",
        "date_joined",
    ),
    "accounts_namespacegrant": None,
    "auth_user_groups": None,
    "auth_group": None,
}


def _trigger_name(table: str) -> str:
    return f"{table}_token_lookup_changed"


def _create() -> list[str]:
    statements = [
        f"CREATE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$"
        f" BEGIN PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME); RETURN NULL; END $$;"
    ]
    for table, columns in WATCHED.items():
        update = f"UPDATE OF {', '.join(columns)}" if columns else "UPDATE"
        statements.append(
            f"CREATE TRIGGER {_trigger_name(table)} AFTER INSERT OR {update} OR DELETE OR TRUNCATE"
            f" ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()"
        )
    return statements


def _drop() -> list[str]:
    return [
        *(f"DROP TRIGGER IF EXISTS {_trigger_name(table)} ON {table}" for table in WATCHED),
        f"DROP FUNCTION IF EXISTS {FUNCTION}()",
    ]


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(on_postgresql(_create()), on_postgresql(_drop()))]
