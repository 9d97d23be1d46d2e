"""Shared fixtures: where the reference material lives, and named personas."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the checkout (CI lays a copy there); skip tests that need it otherwise."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"no reference material at {SHARED_DIR}: these tests need ../shared beside the repo")
    return SHARED_DIR
