"""Typed, stored job events with a per-job gap-free sequence number."""

from __future__ import annotations

from django.db import models

from apps.core.model_parts import optional_cluster


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


class Incident(models.Model):
    """One fault of one job and what MindCluster did about it, from detection to the outcome."""

    class Outcome(models.TextChoices):
        OPEN = "open"
        RECOVERED = "recovered"  # a process-level strategy worked; training continued
        RESCHEDULED = "rescheduled"  # Pod- or Job-level rescheduling restarted training
        FAILED = "failed"  # the job failed: nothing left to restart it with

    job = models.ForeignKey("jobs.TrainingJob", on_delete=models.CASCADE, related_name="incidents")
    number = models.PositiveIntegerField(help_text="Per job: 1, 2, 3 ...")
    opened_at = models.DateTimeField(help_text="When the fault happened (its first report)")
    detected_at = models.DateTimeField(null=True, blank=True, help_text="ClusterD stopped training")
    decided_at = models.DateTimeField(null=True, blank=True, help_text="First strategy chosen")
    closed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.OPEN)
    fault = models.JSONField(default=dict, blank=True, help_text="codes, levels, types, signatures")
    strategies = models.JSONField(default=list, blank=True, help_text="Strategies tried, in order")
    attempts = models.JSONField(default=list, blank=True, help_text="[{strategy, outcome, at}]")
    ranks = models.JSONField(default=list, blank=True)
    nodes = models.JSONField(default=list, blank=True)
    decisions = models.JSONField(default=list, blank=True, help_text="Platform-mode questions and answers")
    detect_ms = models.PositiveBigIntegerField(null=True, blank=True)
    decide_ms = models.PositiveBigIntegerField(null=True, blank=True)
    recover_ms = models.PositiveBigIntegerField(null=True, blank=True)
    first_seq = models.PositiveBigIntegerField()
    last_seq = models.PositiveBigIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["job", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["job", "number"], name="uniq_incident_number_per_job"),
            # ClusterD runs one recovery state machine per job: at most one open incident.
            models.UniqueConstraint(
                fields=["job"], condition=models.Q(closed_at__isnull=True), name="one_open_incident_per_job"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} incident {self.number} ({self.outcome})"

    @property
    def is_open(self) -> bool:
        return self.closed_at is None

    def as_dict(self) -> dict[str, object]:
        """JSON-safe form for the API, webhooks and the websocket."""
        return {
            "id": self.pk,
            "job": self.job_id,
            "number": self.number,
            "outcome": self.outcome,
            "opened_at": self.opened_at.isoformat(),
            "detected_at": self.detected_at.isoformat() if self.detected_at else None,
            "decided_at": self.decided_at.isoformat() if self.decided_at else None,
            "closed_at": self.closed_at.isoformat() if self.closed_at else None,
            "fault": self.fault,
            "strategies": self.strategies,
            "attempts": self.attempts,
            "ranks": self.ranks,
            "nodes": self.nodes,
            "decisions": self.decisions,
            "durations_ms": {"detect": self.detect_ms, "decide": self.decide_ms, "recover": self.recover_ms},
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
        }


class RestartBudget(models.Model):
    """Per job: the restart limits in force and how much of each has been used."""

    job = models.OneToOneField("jobs.TrainingJob", on_delete=models.CASCADE, related_name="restart_budget")
    backoff_limit = models.PositiveIntegerField(null=True, blank=True, help_text="null = unlimited")
    fault_retry_times = models.PositiveIntegerField(default=0, help_text="0 = unconditional retry off")
    max_restarts = models.PositiveIntegerField(null=True, blank=True, help_text="torchrun --max_restarts")
    reschedules_used = models.PositiveIntegerField(default=0, help_text="Pod- and Job-level reschedules")
    process_restarts_used = models.PositiveIntegerField(
        default=0, help_text="Process-level restarts (recover, recover-in-place, elastic-training)"
    )
    exhausted_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"budget of job {self.job_id}"

    @staticmethod
    def _left(limit: int | None, used: int) -> int | None:
        return None if limit is None else max(0, limit - used)

    @property
    def backoff_left(self) -> int | None:
        return self._left(self.backoff_limit, self.reschedules_used)

    @property
    def fault_retry_left(self) -> int | None:
        return self._left(self.fault_retry_times or None, self.reschedules_used)

    @property
    def max_restarts_left(self) -> int | None:
        return self._left(self.max_restarts, self.process_restarts_used)

    @property
    def exhausted(self) -> bool:
        """A limit that applies has nothing left (the next fault cannot be absorbed by it)."""
        return any(left == 0 for left in (self.backoff_left, self.fault_retry_left, self.max_restarts_left))

    def as_dict(self) -> dict[str, object]:
        return {
            "backoff_limit": {
                "limit": self.backoff_limit,
                "used": self.reschedules_used,
                "left": self.backoff_left,
            },
            "fault_retry_times": {
                "limit": self.fault_retry_times,
                "used": self.reschedules_used if self.fault_retry_times else 0,
                "left": self.fault_retry_left,
            },
            "max_restarts": {
                "limit": self.max_restarts,
                "used": self.process_restarts_used,
                "left": self.max_restarts_left,
            },
            "exhausted": self.exhausted,
        }


class IngestCursor(models.Model):
    """Where the ingester's watch of one source in one cluster resumes (its last resourceVersion)."""

    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="ingest_cursors")
    source = models.CharField(max_length=120, help_text="e.g. podgroups:*, configmaps:mindx-dl")
    resource_version = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "source"], name="uniq_cursor_per_source")]

    def __str__(self) -> str:
        return f"{self.cluster_id}:{self.source}@{self.resource_version}"


class ObservedObject(models.Model):
    """The last state the ingester stored events for, per cluster object (level-triggered sources).

    Diffing against this row (locked while diffing) is what makes replays, relists, restarts and a
    second ingester harmless: a state already seen yields no new event.
    """

    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=32)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    state = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "kind", "namespace", "name"], name="uniq_observed_object"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}@{self.resource_version}"


class Webhook(models.Model):
    """An outbound HTTP endpoint told about incidents, exhausted budgets and pending decisions."""

    class Kind(models.TextChoices):
        INCIDENT_OPENED = "incident.opened"
        INCIDENT_CLOSED = "incident.closed"
        BUDGET_EXHAUSTED = "budget.exhausted"
        DECISION_PENDING = "decision.pending"

    name = models.CharField(max_length=100)
    cluster = optional_cluster(related_name="webhooks")
    namespace = models.CharField(max_length=63, default="*", help_text='"*" = every namespace')
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=200, help_text="HMAC-SHA256 key for the X-Signature header")
    events = models.JSONField(default=list, blank=True, help_text="Kinds to send; empty = all")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} → {self.url}"

    def wants(self, kind: str) -> bool:
        return not self.events or kind in self.events


class WebhookDelivery(models.Model):
    """One message to one webhook, and what happened when we sent it."""

    class State(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    delivery_id = models.UUIDField(unique=True, help_text="X-Delivery-Id: receivers de-duplicate on it")
    kind = models.CharField(max_length=32)
    payload = models.JSONField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    requeue_after = models.DateTimeField(
        null=True, blank=True, help_text="A pending delivery is re-queued by the sweep after this (its lease)"
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["state", "created_at"])]

    def __str__(self) -> str:
        return f"{self.kind} → {self.webhook_id} ({self.state})"


class SourceKey(models.Model):
    """A Kubernetes Event the ingester has already handled, by its source identity.

    Events are not level-triggered, so replaying them after a restart is only harmless if we remember
    each one, including those that became no new row (merged into an incident, or stored first by
    another source). Rows older than Kubernetes' event TTL are pruned by the ingester.
    """

    job = models.ForeignKey("jobs.TrainingJob", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "key"], name="uniq_source_key_per_job")]

    def __str__(self) -> str:
        return self.key
