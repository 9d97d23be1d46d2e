"""Which audit entries a user may read: everything for superusers, their namespaces' jobs for admins."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import CharField, QuerySet
from django.db.models.functions import Cast

from apps.accounts.models import Role
from apps.accounts.selectors import jobs_visible_to
from apps.audit.models import AuditEntry
from apps.jobs.models import TrainingJob

JOB_OBJECT_TYPE = TrainingJob._meta.label_lower


def audit_visible_to(user: User | AnonymousUser) -> QuerySet[AuditEntry]:
    """One query: entries about jobs in namespaces the user administers (all entries for superusers)."""
    entries = AuditEntry.objects.all()
    if user.is_authenticated and getattr(user, "is_superuser", False):
        return entries
    administered = (
        jobs_visible_to(user, min_role=Role.ADMIN).annotate(pk_text=Cast("pk", CharField())).values("pk_text")
    )
    return entries.filter(object_type=JOB_OBJECT_TYPE, object_id__in=administered)
