from __future__ import annotations

from django.apps import AppConfig


class FleetConfig(AppConfig):
    name = "apps.fleet"
    label = "fleet"
    verbose_name = "Fleet summaries and retention"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The events app tells us about every closed incident it saves (it cannot import us).
        from apps.events.signals import incident_changed
        from apps.fleet.summaries import on_incident_changed

        incident_changed.connect(on_incident_changed, dispatch_uid="fleet-summary")
