"""Local development settings (``bootstrap.py run``): base, DEBUG on, and the simulated cluster installed.

The simulator (``simcluster``) is a development tool, not part of the product: only this module and
the test settings put its management commands (``simcluster``, ``sim_fault``) in INSTALLED_APPS.
"""

from __future__ import annotations

import os

# Before base is imported: base decides at import time whether a development SECRET_KEY is allowed.
os.environ.setdefault("DEBUG", "true")

from controlplane.settings.base import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "simcluster"]  # noqa: F405
# `manage.py runserver` with websockets: Daphne's runserver, when the dev tools are installed
# (requirements-dev.txt); the product itself serves with uvicorn and does not ship Daphne.
try:
    import daphne  # type: ignore[import-untyped]  # noqa: F401
except ImportError:
    pass
else:
    INSTALLED_APPS = ["daphne", *INSTALLED_APPS]
