"""Long-running platform-mode watcher: ``python manage.py decide``."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand

from apps.decisions.watcher import run_decision_watchers


class Command(BaseCommand):
    help = "Watch PodGroups for ClusterD's platform-mode questions and answer them (runs until stopped)."

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        self.stdout.write("watching PodGroups for platform-mode questions; Ctrl-C stops")
        run_decision_watchers(stop)
