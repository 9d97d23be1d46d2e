"""``python manage.py register_webhook``: point a cluster's API server at our admission webhook."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.admission.webhook_config import MANAGED_LABEL, webhook_configuration
from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
from apps.jobs.clusters import cluster_ref
from apps.jobs.models import Cluster


class Command(BaseCommand):
    help = (
        "Create or update the MutatingWebhookConfiguration that sends AscendJob CREATEs to this control "
        f"plane (namespaces labelled {MANAGED_LABEL}=true; failurePolicy Ignore; timeout 2 s)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", default="", help="Cluster name (default: the default cluster)")
        parser.add_argument(
            "--url",
            default="http://127.0.0.1:8000",
            help="Base URL of this control plane as the API server reaches it (http only on loopback)",
        )
        parser.add_argument("--ca-bundle", default="", help="PEM file of the CA that signed the https URL")
        parser.add_argument("--timeout", type=int, default=2, help="timeoutSeconds, 1-30 (default 2)")
        parser.add_argument(
            "--manage-namespace",
            action="append",
            default=[],
            metavar="NS",
            help=f"Also label namespace NS {MANAGED_LABEL}=true (created if missing); repeatable",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["cluster"]
        cluster = (
            Cluster.objects.filter(name=name).first()
            if name
            else Cluster.objects.filter(is_default=True).first()
        )
        if cluster is None:
            raise CommandError(f"no cluster {name!r}" if name else "no default cluster; pass --cluster NAME")
        if not 1 <= options["timeout"] <= 30:
            raise CommandError("--timeout must be between 1 and 30 seconds (the API server's range)")
        base = options["url"].rstrip("/")
        if urlsplit(base).scheme not in ("http", "https"):
            raise CommandError("--url must start with http:// or https://")
        client_config: dict[str, Any] = {
            "url": f"{base}/admission/ascendjobs/?{urlencode({'cluster': cluster.name})}"
        }
        if options["ca_bundle"]:
            try:
                pem = Path(options["ca_bundle"]).read_bytes()
            except OSError as exc:
                raise CommandError(f"cannot read --ca-bundle: {exc}") from None
            client_config["caBundle"] = base64.b64encode(pem).decode()
        body = webhook_configuration(client_config, timeout_seconds=options["timeout"])
        try:
            kube.apply_mutating_webhook(cluster_ref(cluster), body)
            for namespace in options["manage_namespace"]:
                kube.label_namespace(cluster_ref(cluster), namespace, {MANAGED_LABEL: "true"})
                self.stdout.write(f"namespace {namespace} is managed ({MANAGED_LABEL}=true)")
        except ClusterError as err:
            raise CommandError(f"cluster {cluster.name!r}: {err.message}") from None
        self.stdout.write(
            f"registered {body['metadata']['name']} in cluster {cluster.name}: {client_config['url']}"
        )
