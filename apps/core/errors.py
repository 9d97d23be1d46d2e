"""Domain errors that interfaces (API, form, commands) turn into user-facing answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class ApplicationError(Exception):
    """Base class: an expected failure with a message a user can act on."""


class ValidationFailed(ApplicationError):
    """The validator rejected a policy; ``issues`` carry code, field, message and allowed values."""

    def __init__(self, issues: Sequence[Any], warnings: Sequence[Any] = ()) -> None:
        self.issues = tuple(issues)
        self.warnings = tuple(warnings)
        first = self.issues[0].message if self.issues else "invalid policy"
        super().__init__(first)


class RevisionConflict(ApplicationError):
    """A write based on a stale revision (lost-update guard)."""

    def __init__(self, current: int) -> None:
        self.current = current
        super().__init__(f"the policy has changed: the current revision is {current}")
