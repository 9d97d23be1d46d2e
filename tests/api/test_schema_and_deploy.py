"""The committed OpenAPI document matches the code; docs are served without a CDN; deploy checks pass."""

from __future__ import annotations

import os
import re
import secrets
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command

from tests.support import REPO_ROOT
from tests.support.processes import python_in_repo

COMMITTED_SCHEMA = REPO_ROOT / "docs" / "openapi.yaml"
REGENERATE = "python manage.py spectacular --file docs/openapi.yaml --validate"


def test_committed_schema_matches_the_code(tmp_path: Path) -> None:
    fresh = tmp_path / "openapi.yaml"
    call_command("spectacular", "--file", str(fresh), "--validate", "--fail-on-warn")
    assert COMMITTED_SCHEMA.exists(), f"docs/openapi.yaml is missing; create it with: {REGENERATE}"
    committed = yaml.safe_load(COMMITTED_SCHEMA.read_text(encoding="utf-8"))
    generated = yaml.safe_load(fresh.read_text(encoding="utf-8"))
    assert committed == generated, (
        "The API contract changed: docs/openapi.yaml no longer matches the code. If the change is intended, "
        f"regenerate it with `{REGENERATE}` and commit it; otherwise fix the code."
    )


@pytest.mark.django_db
def test_schema_and_swagger_ui_are_served_without_a_cdn(client: Any, django_user_model: Any) -> None:
    client.force_login(django_user_model.objects.create_user("reader", password="pw"))
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"openapi: 3" in schema.content
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "drf_spectacular_sidecar" in html
    external = re.findall(r'(?:src|href)="(https?://[^"]+)"', html)
    assert external == [], f"the docs page loads assets from outside: {external}"


@pytest.mark.slow
def test_check_deploy_prints_no_warnings() -> None:
    alphabet = string.ascii_letters + string.digits + "!@#%^&*(-_=+)"
    # Production environment: nothing the test runner itself may have set (e.g. browser-test flags).
    inherited = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {
        **inherited,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings.base",
        "DEBUG": "false",
        "SECRET_KEY": "".join(secrets.choice(alphabet) for _ in range(50)),
        "SECURE_SSL_REDIRECT": "true",
        "SESSION_COOKIE_SECURE": "true",
        "CSRF_COOKIE_SECURE": "true",
        "SECURE_HSTS_SECONDS": "31536000",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
        "SECURE_HSTS_PRELOAD": "true",
    }
    result = python_in_repo(["manage.py", "check", "--deploy"], env, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "System check identified no issues" in output and "WARNINGS" not in output, output
