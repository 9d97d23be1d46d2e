"""The fleet view's stored figure per job: what the best candidate could save against the current policy.

Advice itself is computed on request from the incidents (it is cheap); only this summary is stored so
the jobs list can filter and sort 10,000 jobs by it without replaying anything.
"""

from __future__ import annotations

from django.db import models


class AdviceSummary(models.Model):
    job = models.OneToOneField(
        "jobs.TrainingJob", on_delete=models.CASCADE, primary_key=True, related_name="advice_summary"
    )
    could_save = models.FloatField(
        default=0.0,
        db_index=True,
        help_text="NPU-hours/week the best candidate saves against the current policy",
    )
    current_loss = models.FloatField(null=True, blank=True, help_text="NPU-hours/week; null = the job fails")
    best_loss = models.FloatField(null=True, blank=True)
    best = models.JSONField(
        default=dict, blank=True, help_text="strategies, fault_scheduling, pod_rescheduling"
    )
    faults = models.PositiveIntegerField(default=0, help_text="Faults in the window")
    computed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"advice for job {self.job_id}: could save {self.could_save:.1f} NPU-h/week"
