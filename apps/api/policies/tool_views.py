"""Stateless tools for pipelines: validate a policy (CI gate), render a manifest with a policy merged in."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import jobs_visible_to
from apps.api.policies import examples
from apps.api.policies.manifests import declared_release, dump, dump_one, parse_manifest
from apps.api.policies.serializers import (
    RenderInputSerializer,
    RenderOutputSerializer,
    ValidateInputSerializer,
    ValidateOutputSerializer,
)
from apps.core.api_errors import field_error
from apps.core.api_inputs import valid_input
from apps.core.errors import ValidationFailed
from apps.policies.desired import desired_state
from apps.policies.preset_services import preset_spec_resolve
from apps.policies.preview import render_output, with_release
from apps.policies.services import job_context
from apps.policies.spec import RELEASES, JobContext
from apps.policies.validation import ValidationResult, validate_manifest, validate_policy

TAG = "tools"
log = logging.getLogger(__name__)


def _merge(result: ValidationResult, manifest_issues: tuple[Any, ...]) -> ValidationResult:
    """Manifest issues first (they are about the job), then the policy's, as ``validate_policy`` prints."""
    errors = tuple(i for i in manifest_issues if i.severity == "error") + result.errors
    warnings = tuple(i for i in manifest_issues if i.severity == "warning") + result.warnings
    return ValidationResult(errors=errors, warnings=warnings, spec=None if errors else result.spec)


def _release_of(manifest: Any) -> str | None:
    release = declared_release(manifest)
    return release if release in RELEASES else None


@extend_schema(tags=[TAG])
class PolicyValidateApi(APIView):
    """``POST /policies/validate/``: validation results are data here (200), so CI can print them."""

    @extend_schema(
        summary="Validate a policy (optionally for a manifest or a registered job) without saving",
        request=ValidateInputSerializer,
        examples=examples.VALIDATE,
        responses=ValidateOutputSerializer,
    )
    def post(self, request: Request) -> Response:
        values = valid_input(ValidateInputSerializer, request.data)
        context: JobContext | None = None
        manifest_issues: tuple[Any, ...] = ()
        if "manifest" in values:
            parsed = parse_manifest(values["manifest"])
            manifest_issues = validate_manifest(parsed.job)
            context = JobContext.from_manifest(parsed.job)
        if "job" in values:
            job = jobs_visible_to(request.user).filter(pk=values["job"]).first()
            if job is None:
                raise field_error("job", f"No job {values['job']} that you may see.", "unknown_job")
            stored = job_context(job)
            context = (
                dataclasses.replace(context, mindcluster_version=job.mindcluster_version)
                if context
                else stored
            )
        result = _merge(validate_policy(values["spec"], context), manifest_issues)
        return Response(result.to_dict())


@extend_schema(tags=[TAG])
class RenderApi(APIView):
    """``POST /render/``: the manifest with the policy merged in, in the format it came in, plus artifacts."""

    @extend_schema(
        summary="Render an AscendJob manifest with a policy or preset merged in",
        request=RenderInputSerializer,
        examples=examples.RENDER,
        responses=RenderOutputSerializer,
    )
    def post(self, request: Request) -> Response:
        values = valid_input(RenderInputSerializer, request.data)
        parsed = parse_manifest(values["manifest"])
        raw_spec = values["policy"] if "policy" in values else _preset_spec(values["preset"])
        manifest = parsed.job
        manifest_issues = validate_manifest(manifest)
        result = validate_policy(
            with_release(raw_spec, _release_of(manifest)), JobContext.from_manifest(manifest)
        )
        merged = _merge(result, manifest_issues)
        if not merged.ok or merged.spec is None:
            raise ValidationFailed(merged.errors, warnings=merged.warnings)
        try:
            # No revision: this render belongs to no job's history, so it is not stamped.
            rendered = desired_state(manifest, merged.spec).rendered
        except Exception as exc:  # a manifest shape the validator let through but rendering cannot handle
            log.exception("render failed on a manifest that passed validation")
            raise field_error(
                "manifest",
                f"The manifest could not be rendered ({type(exc).__name__}: {exc}).",
                "render_failed",
            ) from None
        fmt = values.get("format") or parsed.format
        output = render_output(rendered)
        configmap = rendered.configmap
        return Response(
            {
                "format": fmt,
                "manifest": dump(parsed.with_job(rendered.manifest), fmt),
                "configmap": dump_one(configmap, fmt) if configmap is not None else None,
                "artifacts": output["artifacts"],
                "effects": output["effects"],
                "notes": output["notes"],
                "warnings": [issue.to_dict() for issue in merged.warnings],
                "spec": merged.spec.to_dict(),
            }
        )


def _preset_spec(name: str) -> Any:
    # A stateless tool has no job, hence no namespace: only the global presets (and built-ins).
    preset = preset_spec_resolve(name, cluster=None, namespace="")
    if preset is None:
        raise field_error("preset", f"No preset named {name!r}.", "unknown_preset")
    return preset
