"""Hand-rendered API output for the hot read paths, saying exactly what the DRF serializers say.

Instantiating a serializer deep-copies its declared fields (a ModelSerializer also introspects its
model) on every request: for the job detail and policy GET that was a fifth of their CPU
(bench/profile_api.py). The serializers stay the documented schema; tests compare the two renderings.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone


def api_datetime(value: datetime | None) -> str | None:
    """``serializers.DateTimeField().to_representation`` with DRF's ISO 8601 default ("Z" for UTC)."""
    if value is None:
        return None
    text = value.astimezone(timezone.get_current_timezone()).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
