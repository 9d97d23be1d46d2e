"""Steps shared by migrations. Kept small and stable: a migration that imports them must still do
what it did when it was written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def on_postgresql(statements: list[str]) -> Callable[[Any, Any], None]:
    """A ``RunPython`` function that executes ``statements`` on PostgreSQL and does nothing elsewhere
    (the embedded SQLite keeps neither triggers nor notices)."""

    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement, params=None)

    return run
