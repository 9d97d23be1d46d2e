"""Browser tests: Playwright driving Debian's Chromium headless against a real ASGI server.

Run them in their own pytest process: ``pytest -m browser tests/browser``. Every test here is
marked ``browser`` automatically, so ``-m "not browser"`` leaves them out of the main run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# Playwright's sync API keeps an asyncio loop in this thread; Django then refuses ORM calls from the
# test body ("async context"). The test process only, and it is single-threaded: safe to allow.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


def chromium_available() -> bool:
    try:
        import playwright  # noqa: F401
    except ImportError:
        return False
    return Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is not None
