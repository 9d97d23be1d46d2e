"""MindCluster releases the control plane knows, oldest first."""

from __future__ import annotations

from typing import Final

RELEASES: Final = ("7.0", "7.1", "7.2", "7.3", "26.0", "26.1")
DEFAULT_RELEASE: Final = "26.1"


def release_at_least(release: str, minimum: str) -> bool:
    """True when ``release`` is ``minimum`` or newer (both must be in RELEASES)."""
    return RELEASES.index(release) >= RELEASES.index(minimum)
