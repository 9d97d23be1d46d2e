"""Typed, stored job events with a per-job gap-free sequence number."""

from __future__ import annotations

from django.db import models


class JobEvent(models.Model):
    """Something that happened to a job, stored before anyone is told about it."""

    class Severity(models.TextChoices):
        INFO = "info"
        WARNING = "warning"
        ERROR = "error"

    job = models.ForeignKey("jobs.TrainingJob", on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField(help_text="Per-job, monotonic, gap-free")
    kind = models.CharField(max_length=48, db_index=True, help_text="e.g. policy.applied, fault.detected")
    severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.INFO)
    message = models.CharField(max_length=500)
    source = models.CharField(max_length=32, help_text="push, reconcile, ingest, clusterd, decision ...")
    dedupe_key = models.CharField(max_length=200, blank=True, help_text="Same key twice = same event")
    data = models.JSONField(default=dict, blank=True)
    occurred_at = models.DateTimeField()
    stored_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["job", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["job", "seq"], name="uniq_event_seq_per_job"),
            models.UniqueConstraint(
                fields=["job", "dedupe_key"],
                condition=~models.Q(dedupe_key=""),
                name="uniq_event_dedupe_per_job",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id}#{self.seq} {self.kind}"

    def as_message(self) -> dict[str, object]:
        """JSON-safe form for the websocket and the API."""
        return {
            "type": "event",
            "job": self.job_id,
            "seq": self.seq,
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "source": self.source,
            "data": self.data,
            "occurred_at": self.occurred_at.isoformat(),
            "stored_at": self.stored_at.isoformat(),
        }
