"""Idempotent first-run setup: a first administrator, a fresh API token and the built-in presets.

With ``--seed-jobs`` it also creates the demo AscendJobs (``apps.web.demo_jobs``) in the default
cluster: ``bootstrap.py run`` asks for them when it runs the simulated cluster, which itself seeds
nothing the product would have to render.

The password is ``--password`` or ``DEMO_PASSWORD`` when given. Otherwise it is the documented
``demo-password`` only with ``DEBUG=true`` (``bootstrap.py run``, a local run on 127.0.0.1, prints
it on purpose); with ``DEBUG=false`` (Compose, anything reachable) it is random, printed once when
the user is created, and never again.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from apps.accounts.models import ApiToken
from apps.accounts.services import token_issue, token_revoke
from apps.jobs.clusters import cluster_ref, cluster_register_default
from apps.policies.services import presets_sync_builtin
from apps.web.demo_jobs import seed_demo_jobs

DEMO_TOKEN_NAME = "demo (bootstrap run)"
LOCAL_DEMO_PASSWORD = "demo-password"  # DEBUG runs only; documented in the README


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

    def handle(
        self, *args: Any, username: str, password: str | None, seed_jobs: bool = False, **options: Any
    ) -> None:
        if not password:
            password = LOCAL_DEMO_PASSWORD if settings.DEBUG else secrets.token_urlsafe(18)
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(password)
            user.save()
        # A fresh demo token per run (keys are stored hashed, so an old one cannot be shown again);
        # the previous demo tokens are revoked so they do not pile up.
        for old in ApiToken.objects.filter(user=user, name=DEMO_TOKEN_NAME, revoked_at__isnull=True):
            token_revoke(old)
        _, key = token_issue(user, DEMO_TOKEN_NAME)
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
        self.stdout.write(f"API token: {key}")
        self.stdout.write(f"built-in presets: {count}")
