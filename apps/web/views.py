"""Page views: each renders one template with the JSON the page starts from.

Everything a page changes, and everything it refreshes, goes through the REST API from the browser;
the few ``*.json`` views here only re-serve the same start-up summaries after a reconnect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.accounts.models import Role
from apps.accounts.selectors import (
    clusters_visible_to,
    has_role,
    is_admin_somewhere,
    is_editor_somewhere,
    jobs_visible_to,
    role_for,
)
from apps.api.jobs.serializers import JobOutputSerializer
from apps.api.policies.bodies import policy_body
from apps.policies.spec import (
    BOUNDS,
    DECISION_ACTIONS,
    FAULT_TYPES,
    PLATFORM_STRATEGIES,
    RELEASES,
    PolicySpec,
)
from apps.web import summaries, texts
from apps.web.overview import BadQuery, filter_choices, overview_page


def _user_info(request: HttpRequest) -> dict[str, Any]:
    user = request.user
    return {
        "name": user.get_username(),
        "is_editor": is_editor_somewhere(user),
        "is_admin": is_admin_somewhere(user),
    }


def _page(
    request: HttpRequest, template: str, nav: str, data: dict[str, Any], **context: Any
) -> HttpResponse:
    """Render a page with its start-up JSON under ``bootstrap`` (read by the page's module)."""
    bootstrap = {"user": _user_info(request), **data}
    return render(request, template, {"nav": nav, "bootstrap": bootstrap, **context})


@login_required
@require_GET
def jobs_overview(request: HttpRequest) -> HttpResponse:
    """The jobs the user may see, a page at a time, filtered and sorted by the server (``?`` as the API)."""
    try:
        page: dict[str, Any] = overview_page(request)
        error = None
    except BadQuery as exc:
        page, error = {"count": 0, "offset": 0, "limit": 0, "ordering": "", "results": []}, exc.body
    data = {"page": page, "error": error, "choices": filter_choices(request.user), "basis": texts.BASIS_TEXT}
    return _page(request, "web/jobs.html", "jobs", data)


def _visible_job(request: HttpRequest, job_id: int) -> Any:
    job = (
        jobs_visible_to(request.user).select_related("cluster", "current_revision").filter(pk=job_id).first()
    )
    if job is None:
        raise Http404("No job with this id (or you may not see it).")
    return job


@login_required
@require_GET
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job page: policy form, preview, apply, history, what-if, and the live timeline."""
    job = _visible_job(request, job_id)
    data = {
        "job": JobOutputSerializer(job).data,
        "policy": policy_body(job),
        "summary": summaries.job_summary(request.user, job.pk),
        "last_seq": summaries.last_event_seq(job.pk),
        "incidents": summaries.recent_incidents(job.pk),
        "budget": summaries.budget_of(job),
        "can_edit": has_role(role_for(request.user, job), Role.EDITOR),
        "defaults": PolicySpec(mindcluster_version=job.mindcluster_version).to_dict(),
        "bounds": {name: list(pair) for name, pair in BOUNDS.items()},
        "strategies": texts.strategy_choices(),
        "platform_strategies": list(PLATFORM_STRATEGIES),
        "decision_actions": list(DECISION_ACTIONS),
        "fault_types": list(FAULT_TYPES),
        "effect_when": texts.EFFECT_WHEN_TEXT,
        "waits_for": texts.WAITS_FOR_TEXT,
        "basis": texts.BASIS_TEXT,
    }
    context = {
        "job": job,
        "strategies": texts.strategy_choices(),
        "releases": RELEASES,
        "fault_scheduling": texts.described(texts.FAULT_SCHEDULING_TEXT),
        "sub_healthy": texts.described(texts.SUB_HEALTHY_TEXT),
        "platform_strategies": PLATFORM_STRATEGIES,
        "fault_types": FAULT_TYPES,
        "bounds": BOUNDS,
    }
    return _page(request, "web/job.html", "jobs", data, **context)


@login_required
@require_GET
def fleet_page(request: HttpRequest) -> HttpResponse:
    """The fleet view (design §4.8): charts and tables of ``GET /api/v1/fleet/``, read by the page."""
    clusters = list(clusters_visible_to(request.user).order_by("name").values_list("name", flat=True))
    return _page(request, "web/fleet.html", "fleet", {"clusters": clusters})


@login_required
@require_GET
def decisions_inbox(request: HttpRequest) -> HttpResponse:
    """Platform-mode questions waiting for a person, with their deadlines."""
    return _page(request, "web/decisions.html", "decisions", {"answers": list(PLATFORM_STRATEGIES)})


@login_required
@require_GET
def presets_page(request: HttpRequest) -> HttpResponse:
    return _page(request, "web/presets.html", "presets", {"defaults": PolicySpec().to_dict()})


@login_required
@require_GET
def namespace_defaults_page(request: HttpRequest) -> HttpResponse:
    """Issue 15: the default policy of a namespace (read for viewers, edited by namespace admins)."""
    return _page(request, "web/namespace_defaults.html", "namespaces", {})


@login_required
@require_GET
def tokens_page(request: HttpRequest) -> HttpResponse:
    return _page(request, "web/tokens.html", "tokens", {})


@login_required
@require_GET
def audit_page(request: HttpRequest) -> HttpResponse:
    return _page(request, "web/audit.html", "audit", {})


def _json_login_required(view: Callable[..., JsonResponse]) -> Callable[..., JsonResponse]:
    """Like ``login_required`` but a JSON 401 instead of a redirect (these are fetched by scripts)."""

    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
        if not request.user.is_authenticated:
            return JsonResponse(
                {"errors": [{"code": "not_authenticated", "message": "Sign in."}]}, status=401
            )
        return view(request, *args, **kwargs)

    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return wrapped


@_json_login_required
@require_GET
def jobs_summary_json(request: HttpRequest) -> JsonResponse:
    """A page of the overview (the same query string as the page and the jobs list API)."""
    try:
        return JsonResponse(overview_page(request))
    except BadQuery as exc:
        return JsonResponse(exc.body, status=exc.status)


@_json_login_required
@require_GET
def job_summary_json(request: HttpRequest, job_id: int) -> JsonResponse:
    """One overview row: a live update of the row of a job that changed, nothing else re-read."""
    row = summaries.job_summary(request.user, job_id)
    if row is None:
        return JsonResponse(
            {"errors": [{"code": "not_found", "message": "No job with this id (or you may not see it)."}]},
            status=404,
        )
    return JsonResponse(row)


class LoginView(auth_views.LoginView):
    """Django's login with the dashboard's template; lands on the overview unless ``next`` says otherwise."""

    template_name = "web/login.html"
    redirect_authenticated_user = True
    next_page = "web:jobs"  # a URL name: Django passes it through resolve_url

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """With OIDC configured, the page offers "Sign in with <provider>" above the local form,
        which stays for break-glass accounts."""
        context = super().get_context_data(**kwargs)
        context["oidc_provider"] = settings.OIDC_PROVIDER_NAME if settings.OIDC_ENABLED else ""
        context["oidc_failed"] = self.request.GET.get("sso") == "failed"
        return context


class LogoutView(auth_views.LogoutView):
    """POST-only logout (Django 5), back to the login page."""

    next_page = "web:login"
