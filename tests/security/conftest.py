"""The API personas (owner, teammate, outsider, admin) of ``tests/api/conftest.py``, reused here."""

from __future__ import annotations

from tests.api.conftest import superuser_client, world  # noqa: F401  (fixtures)
