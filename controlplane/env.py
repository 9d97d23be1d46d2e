"""Typed readers for settings from the environment.

Each helper fails loudly (``ImproperlyConfigured``) on a value it cannot parse, naming the variable,
what it got and what it accepts, so a typo never silently becomes a default.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_N = TypeVar("_N", int, float)


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_secret(name: str, default: str) -> str:
    """Read ``NAME`` or, for Docker/Kubernetes secrets, the file named by ``NAME_FILE``."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc.strerror}") from exc
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean; use one of: true, false, 1, 0, yes, no, on, off"
    )


def _env_number(name: str, parse: Callable[[str], _N], what: str) -> _N | None:
    """``name`` parsed by ``parse``; None when unset or blank (the caller's default applies)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return parse(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not {what}") from None


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    value = _env_number(name, int, "an integer")
    if value is None:
        return default
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ImproperlyConfigured(f"{name}={value} is out of range [{minimum}, {maximum}]")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    value = _env_number(name, float, "a number")
    if value is None:
        return default
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be >= {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """Comma-separated list; blank items are dropped."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not allowed; choose one of: {', '.join(choices)}")
    return value
