"""``python manage.py ingest``: the long-running event ingester (restartable at any moment)."""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.heartbeat import Heartbeat
from apps.core.metrics import serve_metrics
from apps.ingest.runner import ProcessIngesters
from apps.jobs.clusters import cluster_register_default
from apps.jobs.models import Cluster

# The applier waits on the database a dozen times per item and each time needs the GIL back from
# the watch threads; at Python's default 5 ms interval that wait, not the work, paced a fault storm
# (issue #27; the decider sets the same for the same reason).
SWITCH_INTERVAL_S = 0.0005


class Command(BaseCommand):
    help = (
        "Watch every configured cluster (AscendJobs, PodGroups, reset-config-<job> and job-reschedule-reason "
        "ConfigMaps, Events) and ClusterD's fault.Fault stream; store typed events, group them into "
        "incidents, and broadcast them. Safe to kill at any moment: it resumes from stored resourceVersions."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", action="append", default=[], help="Only this cluster (repeatable)")
        parser.add_argument(
            "--run-seconds", type=float, default=0.0, help="Stop after this long (0 = run until signalled)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        names: list[str] = options["cluster"]
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        cluster_register_default()  # like demo_setup: $KUBECONFIG becomes the default cluster
        known = set(Cluster.objects.values_list("name", flat=True))
        unknown = sorted(set(names) - known)
        if unknown:
            raise CommandError(
                f"unknown cluster(s): {', '.join(unknown)}; known: {', '.join(sorted(known)) or 'none'}"
            )
        if not known:
            raise CommandError("no cluster is configured: set KUBECONFIG or add one in the admin or the API")
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        serve_metrics("ingest")
        ingesters = ProcessIngesters(names or None)
        ingesters.sync()
        self.stdout.write(
            f"ingesting {', '.join(i.cluster.name for i in ingesters.running.values())} (active where this "
            "process holds the cluster's lease, standby elsewhere; clusters added later are competed for "
            "within CLUSTER_RESCAN_SECONDS); Ctrl-C to stop",
        )
        self.stdout.flush()
        deadline = time.monotonic() + options["run_seconds"] if options["run_seconds"] > 0 else None
        # The pod's exec probe checks this file's age (deploy/base/ingester.yaml).
        heartbeat = Heartbeat("ingester")
        heartbeat.beat()
        while not stop.wait(0.5):
            heartbeat.beat()
            ingesters.sync()  # lists the clusters again every CLUSTER_RESCAN_SECONDS
            if deadline is not None and time.monotonic() >= deadline:
                stop.set()
        ingesters.stop()
        self.stdout.write(f"stopped after storing {ingesters.applied} items")
