"""A small fleet whose figures can be worked out by hand (``tests.support.fleet``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fleet import Fleet, small_fleet


@pytest.fixture
def fleet(db: Any, tmp_path: Any) -> Fleet:
    return small_fleet(tmp_path)
