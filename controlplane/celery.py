"""The Celery app: configured from Django settings under the ``CELERY_`` namespace."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")

app = Celery("controlplane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Heartbeat files for the pods' exec probes (deploy/base/): cheaper than `celery inspect ping`.
from apps.core.celery_heartbeat import install as heartbeat_install  # noqa: E402

heartbeat_install(app)
