"""Browser tests: Playwright driving Debian's Chromium headless against a real ASGI server.

Run them in their own pytest process: ``pytest -m browser tests/browser``. Every test here is
marked ``browser`` automatically, so ``-m "not browser"`` leaves them out of the main run. Their
shared parts (Chromium, the live-server test case) are in ``tests/support/browser.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Playwright's sync API keeps an asyncio loop in this thread; Django then refuses ORM calls from the
# test body ("async context"). The test process only, and it is single-threaded: safe to allow.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)
