"""Namespace default policies: what every new AscendJob in a namespace gets at admission (design §4.5)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.core.model_parts import WriteOnceModel


class NamespaceDefault(models.Model):
    """The default policy of one namespace of one cluster; ``current_revision`` null = none in force.

    DELETE only clears ``current_revision``: the history stays, as a job's does.
    """

    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="namespace_defaults")
    namespace = models.CharField(max_length=63)
    current_revision = models.ForeignKey(
        "admission.NamespaceDefaultRevision",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster__name", "namespace"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "namespace"], name="uniq_default_per_namespace")
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.namespace} default"


class NamespaceDefaultRevision(WriteOnceModel):
    """One immutable version of a namespace default; ``spec`` is null for a deletion."""

    rewrite_error = "NamespaceDefaultRevision is immutable; create a new revision instead"

    default = models.ForeignKey(NamespaceDefault, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    spec = models.JSONField(null=True, blank=True, help_text="Canonical policy spec; null = default removed")
    preset_name = models.CharField(max_length=63, blank=True, help_text="Preset the spec was taken from")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    author_name = models.CharField(max_length=150, blank=True)
    comment = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["default", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["default", "number"], name="uniq_default_revision_number")
        ]

    def __str__(self) -> str:
        return f"{self.default} r{self.number}"


class RecreateOperation(models.Model):
    """One "recreate to apply" (design §4.6), recorded before anything is deleted.

    ``manifest`` is the AscendJob to create (the live job with the revision merged), ``original`` the
    live job as it was (server fields dropped), so a worker that dies between the delete and the
    create leaves everything needed to finish (create ``manifest``) or roll back (create
    ``original``). ``steps`` is the operation's own log: one entry per step, with its time.
    """

    class State(models.TextChoices):
        PENDING = "pending", "pending"  # recorded, nothing done in the cluster yet
        DELETING = "deleting", "deleting"  # the old job is being deleted (or is gone)
        CREATING = "creating", "creating"  # the old job is gone; creating from ``manifest``
        ROLLING_BACK = "rolling_back", "rolling back"  # ``manifest`` refused; creating ``original``
        DONE = "done", "done"
        ROLLED_BACK = "rolled_back", "rolled back"
        FAILED = "failed", "failed"

    ACTIVE = (State.PENDING, State.DELETING, State.CREATING, State.ROLLING_BACK)

    job = models.ForeignKey("jobs.TrainingJob", on_delete=models.CASCADE, related_name="recreates")
    revision = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    manifest = models.JSONField(help_text="The AscendJob to create, with the revision rendered")
    original = models.JSONField(help_text="The live job before the delete, for a roll back")
    old_uid = models.CharField(max_length=64)
    new_uid = models.CharField(max_length=64, blank=True)
    steps = models.JSONField(default=list)
    attempts = models.PositiveIntegerField(default=0, help_text="Create attempts so far")
    last_error = models.TextField(blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # The second recreate of a job is refused while one is in progress (409 naming it).
            models.UniqueConstraint(
                fields=["job"],
                condition=models.Q(state__in=["pending", "deleting", "creating", "rolling_back"]),
                name="one_active_recreate_per_job",
            )
        ]
        indexes = [models.Index(fields=["state", "updated_at"], name="recreate_state_updated")]

    def __str__(self) -> str:
        return f"recreate {self.pk} of job {self.job_id} ({self.state})"


class PendingAdmission(models.Model):
    """What the webhook answered for one ``AdmissionReview`` (keyed by the request's ``uid``), until
    the job watcher sees the object created with that uid stamped on it.

    The webhook only proposes: the API server may still reject the create (AlreadyExists, schema,
    another webhook) or drop an answer that came after its timeout. Nothing about the job is
    recorded until the watcher sees the stamp (``confirmed``); unseen ones are ``expired``.
    """

    class Outcome(models.TextChoices):
        ADMITTED = "admitted", "Policy merged"
        SKIPPED = "skipped", "No valid policy to merge"

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        CONFIRMED = "confirmed", "Confirmed"
        EXPIRED = "expired", "Expired"

    uid = models.CharField(max_length=128, unique=True, help_text="AdmissionReview request.uid")
    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    spec = models.JSONField(
        null=True, blank=True, help_text="The merged policy (revision 1); null if skipped"
    )
    sources = models.JSONField(default=list)
    comment = models.CharField(max_length=500, blank=True)
    warnings = models.JSONField(default=list)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    job = models.ForeignKey(
        "jobs.TrainingJob", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["state", "created_at"], name="pending_admission_state")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.uid}, {self.state})"
