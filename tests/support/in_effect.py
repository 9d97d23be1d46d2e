"""Forgetting stored in-effect views, so a test can watch one being computed."""

from __future__ import annotations

from django.core.cache import cache

from apps.policies.in_effect_cache import RECENT, cache_key


def forget_in_effect(job_id: int) -> None:
    """Drop ``job_id``'s view from the shared cache and every view this process keeps."""
    RECENT.clear()
    cache.delete(cache_key(job_id))
