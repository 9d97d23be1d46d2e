"""Admin for events, incidents, budgets, ingest cursors and webhooks (webhooks are configured here)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from apps.audit.admin_hooks import AuditedAdmin
from apps.events.models import Incident, IngestCursor, JobEvent, RestartBudget, Webhook, WebhookDelivery
from apps.events.webhook_urls import webhook_url_save_problem


class RecordedAdmin(admin.ModelAdmin):
    """Events and incidents are what happened: shown, never edited (every field read-only)."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in self.model._meta.fields]


@admin.register(JobEvent)
class JobEventAdmin(RecordedAdmin):
    list_display = ("job", "seq", "kind", "severity", "source", "occurred_at", "stored_at")
    list_filter = ("kind", "severity", "source")
    search_fields = ("message", "dedupe_key")


@admin.register(Incident)
class IncidentAdmin(RecordedAdmin):
    list_display = (
        "job",
        "number",
        "outcome",
        "opened_at",
        "closed_at",
        "detect_ms",
        "decide_ms",
        "recover_ms",
    )
    list_filter = ("outcome",)


@admin.register(RestartBudget)
class RestartBudgetAdmin(admin.ModelAdmin):
    list_display = (
        "job",
        "backoff_limit",
        "fault_retry_times",
        "max_restarts",
        "reschedules_used",
        "exhausted_at",
    )


@admin.register(IngestCursor)
class IngestCursorAdmin(admin.ModelAdmin):
    list_display = ("cluster", "source", "resource_version", "updated_at")


class WebhookForm(forms.ModelForm):
    url = forms.URLField(max_length=500, assume_scheme="https")  # checked by clean_url below

    class Meta:
        model = Webhook
        fields = ["name", "cluster", "namespace", "url", "secret", "events", "active"]

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        problem = webhook_url_save_problem(url)
        if problem:
            raise forms.ValidationError(f"This URL cannot be a webhook target: {problem}.")
        return url


@admin.register(Webhook)
class WebhookAdmin(AuditedAdmin):
    form = WebhookForm
    list_display = ("name", "cluster", "namespace", "url", "active")
    list_filter = ("active",)
    audit_secret_fields = frozenset({"secret"})


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ("kind", "webhook", "state", "attempts", "last_status", "created_at", "delivered_at")
    list_filter = ("state", "kind")
