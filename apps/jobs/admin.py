from __future__ import annotations

from django.contrib import admin

from apps.audit.admin_hooks import AuditedAdmin
from apps.jobs.models import Cluster, TrainingJob


@admin.register(Cluster)
class ClusterAdmin(AuditedAdmin):
    list_display = ("name", "is_default", "in_cluster", "kubeconfig_path", "clusterd_address", "healthy")
    list_filter = ("healthy", "auto_heal")


@admin.register(TrainingJob)
class TrainingJobAdmin(AuditedAdmin):
    list_display = ("name", "namespace", "cluster", "framework", "mindcluster_version", "phase", "deleted_at")
    list_filter = ("cluster", "framework", "mindcluster_version", "source")
    search_fields = ("name", "namespace", "uid")
    raw_id_fields = ("current_revision",)
    readonly_fields = ("uid", "created_at", "updated_at")
