"""Versioned recovery policies per job, and named presets to start from."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from apps.core.model_parts import WriteOnceModel, elapsed_ms, optional_cluster


class Preset(models.Model):
    """A named policy template (design.md §4.2 ``/presets/``), global or owned by one namespace.

    Global presets (no cluster, empty namespace) are the built-ins, read-only, and the ones a
    superuser adds. A namespace's presets belong to one namespace of one cluster and are managed by
    its editors. A name is resolved in the job's namespace first, then among the global ones, so an
    editor of one namespace can never change what another namespace's jobs get.
    """

    name = models.SlugField(max_length=63)
    cluster = optional_cluster(
        related_name="presets",
        help_text="With namespace: the preset belongs to that namespace. Empty: a global preset",
    )
    namespace = models.CharField(
        max_length=63, blank=True, default="", help_text="Empty: a global preset (built-ins, superusers)"
    )
    description = models.CharField(max_length=300, blank=True)
    spec = models.JSONField(help_text="A policy spec (design.md §4.1), validated on save by the service")
    builtin = models.BooleanField(default=False, help_text="Shipped with the product; restored on migrate")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "namespace", "cluster_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["name"], condition=Q(namespace=""), name="uniq_global_preset_name"
            ),
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"],
                condition=~Q(namespace=""),
                name="uniq_namespace_preset_name",
            ),
            # A namespace preset names its cluster, a global one names neither; built-ins are global.
            models.CheckConstraint(
                condition=(Q(namespace="") & Q(cluster__isnull=True))
                | (~Q(namespace="") & Q(cluster__isnull=False) & Q(builtin=False)),
                name="preset_scope_whole",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def is_global(self) -> bool:
        return not self.namespace


class PolicyRevision(WriteOnceModel):
    """One immutable, numbered version of a job's policy. Changes are new revisions, never edits."""

    rewrite_error = "PolicyRevision is immutable; create a new revision instead"

    class Source(models.TextChoices):
        USER = "user"  # saved in the web form or through the API
        PRESET = "preset"  # created from a preset
        RESTORE = "restore"  # copy of an older revision
        OBSERVED = "observed"  # imported from the live job's labels and annotations on adoption
        ADMISSION = "admission"  # merged into the AscendJob by the admission webhook at creation

    job = models.ForeignKey("jobs.TrainingJob", on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    spec = models.JSONField(help_text="Canonical policy spec (PolicySpec.to_dict())")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    author_name = models.CharField(max_length=150, blank=True, help_text="Kept when the user is deleted")
    comment = models.CharField(max_length=500, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.USER)
    source_preset = models.ForeignKey(
        Preset, on_delete=models.SET_NULL, null=True, blank=True, related_name="revisions"
    )
    restored_from = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["job", "-number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="uniq_revision_number_per_job")]

    def __str__(self) -> str:
        return f"{self.job} r{self.number}"


class PolicySync(models.Model):
    """Outbox row: has revision N of a job's policy reached the cluster? Workers claim and push it.

    Written in the same transaction as the revision; the push task is queued on commit, and a
    periodic sweep re-queues rows left ``pending`` or ``applying`` past their lease, so a lost
    message or a killed worker only delays a push.
    """

    class State(models.TextChoices):
        PENDING = "pending"
        APPLYING = "applying"
        APPLIED = "applied"
        FAILED = "failed"
        DRIFTED = "drifted"
        SUPERSEDED = "superseded"

    job = models.ForeignKey("jobs.TrainingJob", on_delete=models.CASCADE, related_name="syncs")
    revision = models.ForeignKey(PolicyRevision, on_delete=models.CASCADE, related_name="syncs")
    generation = models.PositiveIntegerField(help_text="The revision number this row pushes")
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0, help_text="Write attempts against the cluster")
    last_error = models.TextField(blank=True)
    retryable = models.BooleanField(default=True, help_text="False when retrying cannot help (403, 404, 422)")
    claim_token = models.CharField(max_length=64, blank=True, help_text="Celery task id holding the claim")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    applied_resource_versions = models.JSONField(default=dict, blank=True)
    drift = models.JSONField(default=list, blank=True, help_text="Keys whose live value differs")
    effects = models.JSONField(default=list, blank=True, help_text="What takes effect live / at next start")
    queued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True, help_text="Last drift check")

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["job", "generation"], name="uniq_sync_per_generation")]
        indexes = [models.Index(fields=["state", "lease_expires_at"])]

    def __str__(self) -> str:
        return f"{self.job} r{self.generation} {self.state}"

    @property
    def duration_ms(self) -> float | None:
        """Queued → finished."""
        return elapsed_ms(self.queued_at, self.finished_at)
