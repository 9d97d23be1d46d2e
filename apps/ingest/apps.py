from django.apps import AppConfig


class IngestConfig(AppConfig):
    """The event ingester: watches the cluster and stores what it sees as job events (no models)."""

    name = "apps.ingest"
    label = "ingest"
