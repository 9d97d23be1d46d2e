"""The headless Chromium the browser tests and the page benchmark (``bench/bench_page.py``) drive.

No Django here: the benchmark imports it before it has set Django up.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
# Quiet and repeatable: no GPU, no sandbox (containers), nothing fetched in the background.
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


def chromium_available() -> bool:
    try:
        import playwright  # noqa: F401
    except ImportError:
        return False
    return Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is not None
