"""The Celery app: configured from Django settings under the ``CELERY_`` namespace."""

from __future__ import annotations

import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")

app = Celery("controlplane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Heartbeat files for the pods' exec probes (deploy/base/): cheaper than `celery inspect ping`.
from apps.core.celery_heartbeat import install as heartbeat_install  # noqa: E402

heartbeat_install(app)


@signals.worker_init.connect
def _serve_worker_metrics(**_: object) -> None:
    # The worker's main process on METRICS_PORT; with the prefork pool the tasks run in its children,
    # each of which serves its own on METRICS_PORT + 1 + its index (below).
    from apps.core.metrics import serve_metrics

    serve_metrics("celery")


@signals.worker_ready.connect
def _count_queue_depth(**_: object) -> None:
    # After the pool has forked: the main process alone reads the queue depths, once per scrape.
    from django.conf import settings

    from apps.core.metrics import REGISTRY, QueueDepthCollector, metrics_port

    if metrics_port() is not None:
        queues = {settings.CELERY_PUSH_QUEUE, settings.CELERY_SLOW_QUEUE, settings.CELERY_TASK_DEFAULT_QUEUE}
        REGISTRY.register(QueueDepthCollector(app.connection_for_read, sorted(queues)))


@signals.worker_process_init.connect
def _serve_pool_process_metrics(**_: object) -> None:
    from billiard.process import current_process

    from apps.core.metrics import serve_metrics

    serve_metrics("celery-pool", offset=1 + int(getattr(current_process(), "index", 0) or 0))


@signals.worker_process_init.connect
def _warm_broadcast(**_: object) -> None:
    # Each pool process records events (push results, decisions, webhooks): its first broadcast must
    # not wait for the channel layer to be built (about 200 ms, bench/bench_events.py).
    from apps.events import broadcast

    broadcast.warm()
