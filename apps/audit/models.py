"""The audit trail: who changed what, when, from which request, with before and after."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.core.model_parts import WriteOnceModel


class AuditEntry(WriteOnceModel):
    """One recorded mutation. Written in the same transaction as the change it describes."""

    rewrite_error = "AuditEntry is append-only"

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor_name = models.CharField(max_length=150, help_text="username, or 'system:<component>'")
    token_name = models.CharField(max_length=100, blank=True, help_text="API token used, if any")
    action = models.CharField(max_length=64, help_text="e.g. policy.update, preset.delete, job.adopt")
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=300, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.actor_name} {self.action} {self.object_type}:{self.object_id}"
