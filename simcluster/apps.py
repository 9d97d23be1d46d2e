"""Django app config: the simulated MindCluster has no models, only management commands."""

from __future__ import annotations

from django.apps import AppConfig


class SimclusterConfig(AppConfig):
    name = "simcluster"
    label = "simcluster"
    verbose_name = "Simulated MindCluster cluster"
