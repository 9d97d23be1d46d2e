"""Issue #24 item 8: ``demo_setup`` (run by Compose on every ``up``) printed a fresh, never-expiring
superuser key each time, into ``docker compose logs``. Now it issues a token only when asked, with an
expiry, into an owner-only file; the output names the file, never the key."""

from __future__ import annotations

import stat
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

import bootstrap
from apps.accounts.models import ApiToken
from apps.accounts.services import hash_key

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_kubeconfig")]


@pytest.fixture
def no_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "")


def _setup(*args: str) -> str:
    out = StringIO()
    call_command("demo_setup", "--username", "demo", "--password", "pw-for-tests-1234", *args, stdout=out)
    return out.getvalue()


def test_without_the_flag_no_token_is_issued_or_printed() -> None:
    output = _setup()
    assert "API token" not in output
    assert not ApiToken.objects.exists()
    _setup()  # every Compose `up` runs it again: still none
    assert not ApiToken.objects.exists()


def test_the_token_goes_to_an_owner_only_file_with_an_expiry(tmp_path: Path) -> None:
    token_file = tmp_path / "var" / "demo-token"
    output = _setup("--token-file", str(token_file), "--token-hours", "2")
    key = token_file.read_text().strip()
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert key and key not in output
    assert f"API token: in {token_file} (owner-only, expires " in output
    token = ApiToken.objects.get(key_hash=hash_key(key))
    assert token.is_active and token.expires_at is not None
    assert timedelta(hours=1, minutes=59) < token.expires_at - timezone.now() <= timedelta(hours=2)


def test_a_rerun_replaces_the_token_and_tightens_a_loose_file(tmp_path: Path) -> None:
    token_file = tmp_path / "demo-token"
    token_file.write_text("old\n")
    token_file.chmod(0o644)
    _setup("--token-file", str(token_file))
    first = token_file.read_text().strip()
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    _setup("--token-file", str(token_file))
    second = token_file.read_text().strip()
    assert first != second
    assert not ApiToken.objects.get(key_hash=hash_key(first)).is_active  # only the file's key works
    assert ApiToken.objects.get(key_hash=hash_key(second)).is_active


@pytest.mark.parametrize("hours", ["0", "100000"])
def test_an_out_of_range_expiry_is_refused_naming_the_flag(hours: str, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--token-hours"):
        _setup("--token-file", str(tmp_path / "t"), "--token-hours", hours)
    assert not ApiToken.objects.exists()


def test_the_run_summary_points_at_the_file_not_a_key(settings: Any, tmp_path: Path) -> None:
    """``bootstrap.py run`` prints (and writes to var/run-info.txt) the lines of demo_setup's output it
    needs: the token line now names the file."""
    settings.DEBUG = True
    output = _setup("--token-file", str(tmp_path / "demo-token"))
    summary = bootstrap.run_summary("http://127.0.0.1:8000/", output)
    key = (tmp_path / "demo-token").read_text().strip()
    assert "API token: in " in summary and key not in summary
    assert bootstrap.DEMO_TOKEN_FILE == bootstrap.VAR / "demo-token"
