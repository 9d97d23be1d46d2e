"""``python manage.py admission_dev_certs DIR``: certificates for serving the webhook locally.

A serving CA and certificate (127.0.0.1, localhost), a client CA and the API server's client
certificate, and the built-in cluster's AdmissionConfiguration presenting it (``bootstrap.py run``).
Never for production: there cert-manager makes them (``deploy/admission/certificate.yaml``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.admission.devcerts import make_dev_certificates, write_admission_config


class Command(BaseCommand):
    help = "Make local certificates for serve_admission and the built-in cluster's admission config."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory")

    def handle(self, *args: Any, **options: Any) -> None:
        directory = Path(options["directory"])
        certs = make_dev_certificates(directory)
        config = write_admission_config(directory, certs.client)
        self.stdout.write(f"certificates in {directory}; admission configuration {config}")
