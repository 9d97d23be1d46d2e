"""Namespace default policies: what every new AscendJob in a namespace gets at admission (design §4.5)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


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


class NamespaceDefaultRevision(models.Model):
    """One immutable version of a namespace default; ``spec`` is null for a deletion."""

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

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise ValueError("NamespaceDefaultRevision is immutable; create a new revision instead")
        super().save(*args, **kwargs)


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
