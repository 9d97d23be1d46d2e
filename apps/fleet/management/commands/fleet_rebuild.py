"""``python manage.py fleet_rebuild [--since YYYY-MM-DD] [--prune]``: the fleet summaries from history."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.fleet.retention import prune_history
from apps.fleet.summaries import rebuild


class Command(BaseCommand):
    help = (
        "Recompute the fleet summaries (per job and day, per namespace and day) from the stored "
        "incidents and the job rows; days before --since (default: the oldest stored incident's) stay."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--since", help="first UTC day to recompute, YYYY-MM-DD")
        parser.add_argument(
            "--prune", action="store_true", help="then prune history past its retention window (as beat does)"
        )

    def handle(self, *args: Any, since: str | None, prune: bool, **options: Any) -> None:
        first: date | None = None
        if since:
            try:
                first = date.fromisoformat(since)
            except ValueError:
                raise CommandError(
                    f"--since must be a day as YYYY-MM-DD; got {since!r}", returncode=2
                ) from None
        report: dict[str, Any] = {"rebuilt": rebuild(first)}
        if prune:
            report["pruned"] = prune_history()
        self.stdout.write(json.dumps(report, indent=2))
