"""Shared fixtures: where the reference material lives, and named personas."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# Reference material (CRD schema, sample manifests, seed documents), copied into the repository.
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The reference material (``tests/fixtures``), laid out like the team's shared folder."""
    return FIXTURES_DIR


@pytest.fixture(autouse=True, scope="module")
def _fresh_connection_pool_per_module() -> Iterator[None]:
    """Give every test module a fresh pool of database connections.

    Event loops of finished tests (websocket communicators, live servers) take their worker threads
    down while those threads still hold a pooled connection, which the pool then never gets back.
    In a server process the loop and its threads live as long as the process, so nothing strands;
    in a test run the strays add up module after module until DB_POOL_MAX is reached and a later
    test waits 10 s for a connection ("couldn't get a connection"). Closing the pool after each
    module bounds that to one module's worth.
    """
    yield
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        conn.close()
        close_pool = getattr(conn, "close_pool", None)
        if close_pool is not None:
            close_pool()
