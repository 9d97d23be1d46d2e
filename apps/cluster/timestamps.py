"""Timestamps as the Kubernetes API writes them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def parse_k8s_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp from the API (``...Z`` or with an offset, with or without fraction)."""
    if not value or not isinstance(value, str):
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
