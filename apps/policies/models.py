"""Versioned recovery policies per job, and named presets to start from."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class Preset(models.Model):
    """A named policy template (design.md §4.2 ``/presets/``)."""

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=300, blank=True)
    spec = models.JSONField(help_text="A policy spec (design.md §4.1), validated on save by the service")
    builtin = models.BooleanField(default=False, help_text="Shipped with the product; restored on migrate")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PolicyRevision(models.Model):
    """One immutable, numbered version of a job's policy. Changes are new revisions, never edits."""

    class Source(models.TextChoices):
        USER = "user"  # saved in the web form or through the API
        PRESET = "preset"  # created from a preset
        RESTORE = "restore"  # copy of an older revision
        OBSERVED = "observed"  # imported from the live job's labels and annotations on adoption

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

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Immutability: history you cannot trust is worse than none.
        if self.pk is not None:
            raise ValueError("PolicyRevision is immutable; create a new revision instead")
        super().save(*args, **kwargs)
