"""The jobs list's advice column: what the best candidate could save (stored, never computed here)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist


def advice_columns(job: Any) -> dict[str, Any]:
    """``could_save`` (NPU-hours/week, None = not priced yet) and the best candidate's fields, read
    from the job's ``advice_summary`` (select it with the job)."""
    try:
        summary = job.advice_summary
    except ObjectDoesNotExist:
        return {"could_save": None, "advice_best": None}
    return {"could_save": round(summary.could_save, 2), "advice_best": summary.best or None}
