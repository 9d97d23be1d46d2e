"""Idempotent first-run setup: a first administrator and the built-in presets; a demo token on request.

With ``--seed-jobs`` it also creates the demo AscendJobs (``apps.web.demo_jobs``) in the default
cluster: ``bootstrap.py run`` asks for them when it runs the simulated cluster, which itself seeds
nothing the product would have to render.

The password is ``--password`` or ``DEMO_PASSWORD`` when given. Otherwise it is the documented
``demo-password`` only with ``DEBUG=true`` (``bootstrap.py run``, a local run on 127.0.0.1, prints
it on purpose); with ``DEBUG=false`` (Compose, anything reachable) it is random, printed once when
the user is created, and never again.

No API token is made unless asked (issue #24 item 8: Compose used to print a fresh, never-expiring
superuser key on every ``up``, into ``docker compose logs``). ``--token-file PATH`` issues one that
expires after ``--token-hours`` (default 24), revokes the previous demo tokens, and writes the key to
PATH readable by the owner only (0600); the output names the file and the expiry, never the key.
"""

from __future__ import annotations

import os
import secrets
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from apps.accounts.models import ApiToken
from apps.accounts.services import token_issue, token_revoke
from apps.jobs.clusters import cluster_ref, cluster_register_default
from apps.policies.services import presets_sync_builtin
from apps.web.demo_jobs import seed_demo_jobs

DEMO_TOKEN_NAME = "demo (bootstrap run)"
LOCAL_DEMO_PASSWORD = "demo-password"  # DEBUG runs only; documented in the README
DEFAULT_TOKEN_HOURS = 24
MAX_TOKEN_HOURS = 24 * 30


def write_private_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600, also when the file existed with a wider mode.

    Created with 0600 from the start (no window where another user could open it), then chmod-ed,
    because ``os.open``'s mode applies only to a new file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


class Command(BaseCommand):
    help = "Create the demo user (printing its credentials) and load the built-in presets. Safe to re-run."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default=os.environ.get("DEMO_USER", "demo"))
        parser.add_argument(
            "--password",
            default=os.environ.get("DEMO_PASSWORD") or None,
            help="default: DEMO_PASSWORD; else 'demo-password' with DEBUG=true, a random one without",
        )
        parser.add_argument(
            "--seed-jobs",
            action="store_true",
            help="also create the demo AscendJobs (with rendered policies) in the default cluster",
        )
        parser.add_argument(
            "--token-file",
            type=Path,
            default=None,
            metavar="PATH",
            help="issue a demo API token and write its key to PATH (mode 0600); default: no token",
        )
        parser.add_argument(
            "--token-hours",
            type=int,
            default=DEFAULT_TOKEN_HOURS,
            metavar="N",
            help=f"the demo token expires after N hours (default {DEFAULT_TOKEN_HOURS}, "
            f"at most {MAX_TOKEN_HOURS})",
        )

    def handle(
        self,
        *args: Any,
        username: str,
        password: str | None,
        seed_jobs: bool = False,
        token_file: Path | None = None,
        token_hours: int = DEFAULT_TOKEN_HOURS,
        **options: Any,
    ) -> None:
        if not 1 <= token_hours <= MAX_TOKEN_HOURS:
            raise CommandError(f"--token-hours must be between 1 and {MAX_TOKEN_HOURS}")
        if not password:
            password = LOCAL_DEMO_PASSWORD if settings.DEBUG else secrets.token_urlsafe(18)
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(password)
            user.save()
        count = presets_sync_builtin()
        cluster = cluster_register_default()
        if cluster is not None:
            self.stdout.write(f"default cluster {cluster.name!r} from {cluster.kubeconfig_path}")
            if seed_jobs:
                seeded = seed_demo_jobs(cluster_ref(cluster))
                self.stdout.write(f"demo jobs created: {', '.join(seeded) or '(all existed)'}")
        verb = "created" if created else "exists"
        self.stdout.write(
            f"demo user {username!r} {verb}; password: {password if created else '(unchanged)'}"
        )
        if token_file is not None:
            expires_at = self._demo_token(user, token_file, token_hours)
            self.stdout.write(
                f"API token: in {token_file} (owner-only, expires {expires_at:%Y-%m-%d %H:%M} UTC)"
            )
        self.stdout.write(f"built-in presets: {count}")

    def _demo_token(self, user: Any, token_file: Path, hours: int) -> datetime:
        """A fresh demo token in ``token_file`` (keys are stored hashed, so an old one cannot be shown
        again); the previous demo tokens are revoked so that only the one in the file works."""
        for old in ApiToken.objects.filter(user=user, name=DEMO_TOKEN_NAME, revoked_at__isnull=True):
            token_revoke(old)
        expires_at = timezone.now() + timedelta(hours=hours)
        _, key = token_issue(user, DEMO_TOKEN_NAME, expires_at)
        write_private_file(token_file, key + "\n")
        return expires_at
