"""``manage.py render_policy --manifest JOB.yaml (--policy POLICY.json | --preset NAME)``.

Prints the AscendJob with the policy merged in (followed by the ``taskd-manager-<job>`` ConfigMap
when the policy needs one) and, with ``--artifacts DIR``, writes Dockerfile.snippet, launcher.sh,
training-flags.txt and manager.py there. Other documents of a multi-document manifest pass through
unchanged, in order. Needs no database and no cluster (design.md §6).

Exit codes: 0 rendered; 1 the manifest or the policy is invalid (issues as JSON on stderr); 2 usage
errors (unreadable or unparsable file, unknown preset).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.policies.builtin_presets import builtin_preset, preset_names
from apps.policies.desired import desired_state
from apps.policies.management.commands.validate_policy import parse_documents, parse_json, read_text
from apps.policies.spec import JobContext
from apps.policies.validation import validate_manifest, validate_policy
from apps.policies.validation.fields import normalise_release
from mindcluster import keys as k

FORMATS = ("yaml", "json")


class Command(BaseCommand):
    help = "Render a recovery policy into an AscendJob manifest, plus the TaskD manager ConfigMap."
    requires_system_checks: list[str] = []  # must run without a database or a complete deployment

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--manifest",
            required=True,
            metavar="JOB.yaml",
            help="AscendJob manifest, YAML or JSON; other documents pass through unchanged",
        )
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--policy", metavar="POLICY.json", help="policy spec as JSON")
        source.add_argument("--preset", metavar="NAME", help=f"built-in preset: {', '.join(preset_names())}")
        parser.add_argument("--format", choices=FORMATS, default="yaml", help="output format (default yaml)")
        parser.add_argument("--artifacts", metavar="DIR", help="write the artifact files into DIR")

    def handle(self, *args: Any, **options: Any) -> None:
        manifest_path = options["manifest"]
        documents = parse_documents(read_text(manifest_path), manifest_path)
        job_index = ascendjob_index(documents, manifest_path)
        job_manifest = documents[job_index]
        job = job_context(job_manifest)
        raw_policy = load_policy(options, job)

        manifest_issues = validate_manifest(job_manifest)
        result = validate_policy(raw_policy, job)
        errors = [i for i in manifest_issues if i.severity == "error"] + list(result.errors)
        warnings = [i for i in manifest_issues if i.severity == "warning"] + list(result.warnings)
        if errors or result.spec is None:
            report = {
                "valid": False,
                "errors": [i.to_dict() for i in errors],
                "warnings": [i.to_dict() for i in warnings],
            }
            self.stderr.write(json.dumps(report, indent=2, ensure_ascii=False))
            sys.exit(1)
        if warnings:
            self.stderr.write(json.dumps({"warnings": [i.to_dict() for i in warnings]}, ensure_ascii=False))

        rendered = desired_state(job_manifest, result.spec).rendered  # a file, not a revision: no stamp
        output = list(documents)
        output[job_index] = rendered.manifest
        if rendered.configmap is not None:
            output.insert(job_index + 1, rendered.configmap)
        if options.get("artifacts"):
            write_artifacts(Path(options["artifacts"]), rendered.artifacts.files())
        self.stdout.write(dump(output, options["format"]), ending="")


def ascendjob_index(documents: list[Any], path: str) -> int:
    """Which document to render into: the only one, or the single AscendJob among several."""
    if len(documents) == 1:
        return 0  # a wrong kind is reported by validate_manifest with its code
    jobs = [i for i, d in enumerate(documents) if isinstance(d, dict) and d.get("kind") == k.ASCENDJOB_KIND]
    if len(jobs) != 1:
        found = "no" if not jobs else str(len(jobs))
        raise CommandError(
            f"{path}: {found} {k.ASCENDJOB_KIND} documents among {len(documents)}; expected exactly one",
            returncode=2,
        )
    return jobs[0]


def job_context(manifest: Any) -> JobContext:
    """The job facts, including the release the job declares (label or annotation), if any."""
    job = JobContext.from_manifest(manifest)
    declared = job.labels.get(k.LABEL_RELEASE) or job.annotations.get(k.ANNOTATION_RELEASE)
    if declared:
        job = dataclasses.replace(job, mindcluster_version=declared)
    return job


def load_policy(options: dict[str, Any], job: JobContext) -> Any:
    """The policy JSON from --policy, or the named built-in preset fitted to the job's release."""
    if options.get("policy"):
        return parse_json(read_text(options["policy"]), options["policy"])
    name = options["preset"]
    spec = builtin_preset(name)
    if spec is None:
        raise CommandError(
            f"unknown preset {name!r}; built-in presets: {', '.join(preset_names())}", returncode=2
        )
    return preset_for_job(spec, job)


def preset_for_job(spec: dict[str, Any], job: JobContext) -> dict[str, Any]:
    """A preset names no release; render it for the release the job declares, when it declares one."""
    release = normalise_release(job.mindcluster_version) if job.mindcluster_version else None
    if release and "mindcluster_version" not in spec:
        return {**spec, "mindcluster_version": release}
    return spec


def write_artifacts(directory: Path, files: dict[str, str]) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            (directory / name).write_text(content, encoding="utf-8")
    except OSError as exc:
        raise CommandError(
            f"{directory}: cannot write artifacts ({exc.strerror or exc})", returncode=2
        ) from None


class _BlockDumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings (manager.py, launcher lines) as readable literal blocks."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


def dump(documents: list[Any], fmt: str) -> str:
    if fmt == "json":
        return (
            json.dumps({"kind": "List", "apiVersion": "v1", "items": documents}, indent=2, ensure_ascii=False)
            + "\n"
        )
    return yaml.dump_all(
        documents, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, default_flow_style=False
    )
