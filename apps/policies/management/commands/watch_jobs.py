"""Long-running adoption watcher: ``python manage.py watch_jobs``."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand

from apps.jobs.clusters import cluster_register_default
from apps.policies.adoption_watcher import run_watchers


class Command(BaseCommand):
    help = "Watch every configured cluster's AscendJobs and adopt them as TrainingJobs (runs until stopped)."

    def handle(self, *args: Any, **options: Any) -> None:
        cluster_register_default()
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        self.stdout.write("watching AscendJobs; Ctrl-C stops")
        run_watchers(stop)
