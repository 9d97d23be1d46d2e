"""Fill the jobs list's sort columns (jobs 0005) of the jobs that exist, in batches."""

from typing import Any

from django.db import migrations
from django.db.models import Max

BATCH = 2000


def backfill(apps: Any, schema_editor: Any) -> None:
    # The pure parts of the in-effect comparison read only attributes: historical rows serve.
    from apps.policies.observed import brief_of, current_incarnations
    from apps.policies.listing import in_effect_column, strategies_column

    job_model = apps.get_model("jobs", "TrainingJob")
    incarnation_model = apps.get_model("jobs", "JobIncarnation")
    incident_model = apps.get_model("events", "Incident")
    advice_model = apps.get_model("advice", "AdviceSummary")
    last_id = 0
    while True:
        jobs = list(
            job_model.objects.filter(pk__gt=last_id).select_related("current_revision").order_by("pk")[:BATCH]
        )
        if not jobs:
            return
        last_id = jobs[-1].pk
        uids = {job.pk: job.uid for job in jobs}
        rows = incarnation_model.objects.filter(job_id__in=list(uids)).order_by("job_id", "-first_seen_at")
        incarnations = current_incarnations(uids, rows)
        faults = dict(
            incident_model.objects.filter(job_id__in=list(uids))
            .values("job_id")
            .annotate(last=Max("opened_at"))
            .values_list("job_id", "last")
        )
        saves = dict(advice_model.objects.filter(job_id__in=list(uids)).values_list("job_id", "could_save"))
        for job in jobs:
            job.strategies = strategies_column(job.current_revision.spec if job.current_revision else None)
            job.in_effect_state = in_effect_column(brief_of(incarnations.get(job.pk), job.current_revision))
            job.last_fault_at = faults.get(job.pk)
            job.could_save = saves.get(job.pk)
        job_model.objects.bulk_update(jobs, ["strategies", "in_effect_state", "last_fault_at", "could_save"])


class Migration(migrations.Migration):
    dependencies = [
        ("policies", "0005_preset_namespace_scope"),
        ("jobs", "0005_job_list_sort_columns"),
        ("events", "0003_webhookdelivery_requeue_after"),
        ("advice", "0001_initial"),
    ]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
