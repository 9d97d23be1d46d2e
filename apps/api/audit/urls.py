from __future__ import annotations

from django.urls import path

from apps.api.audit.views import AuditListApi

urlpatterns = [path("audit/", AuditListApi.as_view(), name="audit")]
