"""The typed env helpers fail loudly, naming the variable and what is allowed."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from controlplane.env import env_bool, env_choice, env_int, env_list, env_secret


def test_env_bool_accepts_common_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    for raw, expected in [("true", True), ("1", True), ("ON", True), ("no", False), ("0", False)]:
        monkeypatch.setenv("X_FLAG", raw)
        assert env_bool("X_FLAG", default=not expected) is expected


def test_env_bool_rejects_garbage_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG='maybe' is not a boolean"):
        env_bool("X_FLAG", default=False)


def test_env_int_range_and_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_INT", "12")
    assert env_int("X_INT", 1, minimum=1, maximum=20) == 12
    monkeypatch.setenv("X_INT", "abc")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_int("X_INT", 1)
    monkeypatch.setenv("X_INT", "99")
    with pytest.raises(ImproperlyConfigured, match="out of range"):
        env_int("X_INT", 1, minimum=1, maximum=20)
    monkeypatch.delenv("X_INT")
    assert env_int("X_INT", 7) == 7


def test_env_list_and_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env_list("X_LIST", []) == ["a", "b", "c"]
    monkeypatch.setenv("X_CHOICE", "purple")
    with pytest.raises(ImproperlyConfigured, match="choose one of: red, green"):
        env_choice("X_CHOICE", "red", ("red", "green"))


def test_env_secret_reads_file(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    secret = tmp_path / "s"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_secret("X_SECRET", "default") == "s3cret"
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_secret("X_SECRET", "default")
