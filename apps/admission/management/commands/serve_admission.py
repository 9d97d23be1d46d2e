"""``python manage.py serve_admission``: serve the admission webhook over TLS to the API server only.

Requires ``ADMISSION_WEBHOOK=true`` (the webhook's routes exist only then) and a client CA: a
caller must present a certificate that CA signed, or the TLS handshake fails.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.module_loading import import_string

from apps.admission.serving import listening_socket, serve
from apps.admission.tls import ReloadingServerContext
from apps.core.metrics import serve_metrics


class Command(BaseCommand):
    help = (
        "Serve the admission webhook over HTTPS, requiring a client certificate from "
        "ADMISSION_CLIENT_CA_FILE."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="0.0.0.0")
        parser.add_argument("--port", type=int, default=8443)
        parser.add_argument(
            "--probe-port",
            type=int,
            default=8081,
            help="plain-HTTP port answering only /livez and /readyz, for the kubelet (0: none)",
        )
        parser.add_argument(
            "--cert", default=settings.ADMISSION_TLS_CERT_FILE, help="serving certificate (PEM)"
        )
        parser.add_argument("--key", default=settings.ADMISSION_TLS_KEY_FILE, help="its private key (PEM)")
        parser.add_argument(
            "--client-ca",
            default=settings.ADMISSION_CLIENT_CA_FILE,
            help="CA whose certificates may call the webhook (the API server's client certificate)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.ADMISSION_WEBHOOK:
            raise CommandError("ADMISSION_WEBHOOK is not true: this process has no webhook routes to serve")
        missing = [flag for flag in ("cert", "key", "client_ca") if not options[flag]]
        if missing:
            raise CommandError("required: " + ", ".join("--" + m.replace("_", "-") for m in missing))
        try:
            tls = ReloadingServerContext(
                Path(options["cert"]), Path(options["key"]), Path(options["client_ca"])
            )
        except (OSError, ssl.SSLError) as exc:
            raise CommandError(f"TLS: {exc}") from None
        sock = listening_socket(options["host"], options["port"])
        probe_port = options["probe_port"]
        probe_sock = listening_socket(options["host"], probe_port) if probe_port else None
        app = import_string("controlplane.asgi.application")
        # Its own metrics (the certificate's expiry, the reviews' latency) on METRICS_PORT: the TLS
        # port takes only the API server's client certificate, so Prometheus cannot scrape it there.
        serve_metrics("admission")
        self.stdout.write(
            f"admission webhook on https://{options['host']}:{options['port']} (client certificates required)"
        )
        if probe_sock is not None:
            self.stdout.write(
                f"probes (/livez, /readyz only) on http://{options['host']}:{options['probe_port']}"
            )
        asyncio.run(
            serve(app, tls, sock, reload_seconds=settings.ADMISSION_TLS_RELOAD_SECONDS, probe_sock=probe_sock)
        )
