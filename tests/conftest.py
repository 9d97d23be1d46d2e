"""Shared fixtures: where the reference material lives, and named personas."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# Reference material (CRD schema, sample manifests, seed documents), copied into the repository.
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The reference material (``tests/fixtures``), laid out like the team's shared folder."""
    return FIXTURES_DIR
