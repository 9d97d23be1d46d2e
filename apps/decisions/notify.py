"""Telling people a decision waits for them: the inbox shows it; webhooks carry it out."""

from __future__ import annotations

import logging

from apps.decisions.models import Decision

log = logging.getLogger(__name__)


def notify_pending(decision: Decision) -> None:
    """Fan out a ``decision.pending`` webhook when the events app provides webhooks."""
    try:
        from apps.events.webhooks import webhooks_dispatch
    except ImportError:
        return
    try:
        webhooks_dispatch(
            job=decision.job,
            kind="decision.pending",
            payload={
                "decision": decision.pk,
                "job": decision.job_id,
                "faults": decision.faults,
                "deadline_at": decision.deadline_at.isoformat() if decision.deadline_at else None,
            },
        )
    except Exception:  # a webhook problem must never block the decision itself
        log.warning("decision %s: webhook dispatch failed", decision.pk, exc_info=True)
