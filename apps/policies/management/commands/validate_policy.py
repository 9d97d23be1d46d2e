"""``manage.py validate_policy POLICY.json [--manifest JOB.yaml]``: validate a policy for CI.

Prints ``ValidationResult.to_dict()`` as JSON (manifest issues merged in) and exits 0 when valid,
1 when there are errors, 2 on usage errors (missing file, unparsable JSON/YAML). Needs no database
and no cluster: it touches neither the ORM nor the network.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.policies.spec import JobContext
from apps.policies.validation import ValidationResult, validate_manifest, validate_policy
from mindcluster import keys as k

STDIN = "-"


class Command(BaseCommand):
    help = "Validate a recovery policy (JSON) for its MindCluster release and, optionally, a job manifest."
    requires_system_checks: list[str] = []  # must run without a database or a complete deployment

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("policy", metavar="POLICY.json", help='policy spec as JSON; "-" reads stdin')
        parser.add_argument(
            "--manifest",
            metavar="JOB.yaml",
            help="AscendJob manifest (YAML or JSON, multi-document allowed) the policy is meant for",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["policy"] == STDIN and options.get("manifest") == STDIN:
            raise CommandError("only one of POLICY.json and --manifest can be read from stdin", returncode=2)
        raw_policy = parse_json(read_text(options["policy"]), options["policy"])
        job: JobContext | None = None
        manifest_issues: tuple[Any, ...] = ()
        if options.get("manifest"):
            manifest = load_ascendjob(read_text(options["manifest"]), options["manifest"])
            manifest_issues = validate_manifest(manifest)
            job = JobContext.from_manifest(manifest)
        result = merge(validate_policy(raw_policy, job), manifest_issues)
        self.stdout.write(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        if not result.ok:
            sys.exit(1)


def merge(result: ValidationResult, manifest_issues: tuple[Any, ...]) -> ValidationResult:
    """Manifest issues first (they are about the job), then the policy's; no spec if anything failed."""
    errors = tuple(i for i in manifest_issues if i.severity == "error") + result.errors
    warnings = tuple(i for i in manifest_issues if i.severity == "warning") + result.warnings
    return ValidationResult(errors=errors, warnings=warnings, spec=None if errors else result.spec)


def read_text(path: str) -> str:
    """The whole file (or stdin) as text; any failure is a usage error naming the file."""
    try:
        if path == STDIN:
            return sys.stdin.read()
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file", returncode=2) from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path}: not UTF-8 text (byte {exc.start})", returncode=2) from None
    except OSError as exc:
        raise CommandError(f"{path}: cannot read ({exc.strerror or exc})", returncode=2) from None


def display_name(path: str) -> str:
    return "<stdin>" if path == STDIN else path


def parse_json(text: str, path: str) -> Any:
    path = display_name(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", returncode=2
        ) from None
    except (RecursionError, ValueError) as exc:  # absurdly deep nesting, or an int too long to parse
        raise CommandError(f"{path}: cannot parse JSON: {exc}", returncode=2) from None


def load_ascendjob(text: str, path: str) -> Any:
    """The AscendJob document of a manifest file (JSON, or YAML with any number of documents).

    A single document is returned as is, so a wrong ``kind`` shows up as a manifest issue; among
    several, the one whose kind is AscendJob is picked (e.g. the samples' ConfigMap + AscendJob).
    """
    path = display_name(path)
    documents = parse_documents(text, path)
    if len(documents) == 1:
        return documents[0]
    jobs = [d for d in documents if isinstance(d, dict) and d.get("kind") == k.ASCENDJOB_KIND]
    if not jobs:
        kinds = ", ".join(str(d.get("kind")) for d in documents if isinstance(d, dict)) or "none"
        raise CommandError(
            f"{path}: no {k.ASCENDJOB_KIND} document among {len(documents)} (kinds: {kinds})", returncode=2
        )
    return jobs[0]


def parse_documents(text: str, path: str) -> list[Any]:
    """Every non-empty document of a JSON or (multi-document) YAML file."""
    if text.lstrip().startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except (json.JSONDecodeError, RecursionError, ValueError):
            pass  # YAML flow style can look like JSON; let the YAML parser have it
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        position = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise CommandError(f"{path}: invalid YAML{position}: {exc.problem or exc}", returncode=2) from None
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise CommandError(f"{path}: invalid YAML: {exc}", returncode=2) from None
    if not documents:
        raise CommandError(f"{path}: the manifest is empty", returncode=2)
    return documents
