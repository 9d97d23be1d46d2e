"""Platform-mode decisions: ClusterD asks "which strategy now?", the control plane answers."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.core.model_parts import elapsed_ms


class Decision(models.Model):
    """One ``ProcessConfirmFault`` question from ClusterD and its answer (mindcluster.md §6.4)."""

    class State(models.TextChoices):
        PENDING = "pending"  # waiting for a person, until the deadline
        DECIDED = "decided"  # strategy chosen, not yet written to the PodGroup
        WRITTEN = "written"  # ProcessResultFault + final ProcessRecoverStrategy written; ClusterD recovers
        COMPLETED = "completed"  # ProcessRecoverStatus reported; question cleared, standing answer back
        FAILED = "failed"  # could not be written (job gone, cluster refuses)

    job = models.ForeignKey("jobs.TrainingJob", on_delete=models.CASCADE, related_name="decisions")
    podgroup = models.CharField(max_length=320)
    # Text, not a bounded string: a whole-node fault on a large job names thousands of ranks, and the
    # answer (ProcessResultFault) repeats the list; a cut list would drop ranks from the recovery.
    confirm_fault = models.TextField(help_text="ProcessConfirmFault as ClusterD wrote it, never truncated")
    faults = models.JSONField(default=list, help_text='[{"rank": 3, "type": "0"}, ...]')
    context = models.JSONField(default=dict, help_text="What the rules saw: fault types, levels, repeats")
    state = models.CharField(max_length=12, choices=State.choices, default=State.PENDING, db_index=True)
    strategy = models.CharField(max_length=16, blank=True)
    decided_by = models.CharField(max_length=150, blank=True, help_text="rule:<n>, user:<name> or default")
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    reason = models.CharField(max_length=500, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=32, blank=True, help_text="ProcessRecoverStatus")
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    written_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # At most one open question per job: ClusterD asks again only after we cleared the last one.
            models.UniqueConstraint(
                fields=["job"],
                condition=models.Q(state__in=["pending", "decided", "written"]),
                name="one_open_decision_per_job",
            )
        ]

    def __str__(self) -> str:
        ranks = self.confirm_fault if len(self.confirm_fault) <= 60 else f"{self.confirm_fault[:57]}..."
        return f"{self.job} {ranks} → {self.strategy or '?'} ({self.state})"

    @property
    def latency_ms(self) -> float | None:
        """Question observed → answer written."""
        return elapsed_ms(self.created_at, self.written_at)
