"""Dashboard pages. The data behind them is the REST API under /api/v1/."""

from __future__ import annotations

from django.urls import path

from apps.web import views

app_name = "web"

urlpatterns = [
    path("", views.jobs_overview, name="jobs"),
    path("jobs/<int:job_id>/", views.job_detail, name="job"),
    path("fleet/", views.fleet_page, name="fleet"),
    path("decisions/", views.decisions_inbox, name="decisions"),
    path("presets/", views.presets_page, name="presets"),
    path("namespaces/", views.namespace_defaults_page, name="namespace-defaults"),
    path("tokens/", views.tokens_page, name="tokens"),
    path("audit/", views.audit_page, name="audit"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.LogoutView.as_view(), name="logout"),
    path("ui/jobs.json", views.jobs_summary_json, name="jobs-json"),
    path("ui/jobs/<int:job_id>.json", views.job_summary_json, name="job-json"),
]
