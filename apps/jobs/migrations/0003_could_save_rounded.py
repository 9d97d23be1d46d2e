"""TrainingJob.could_save is kept rounded to the hundredth (apps/advice/services.py summary_store):
the jobs list now shows the column as stored. Rounds the copies written before, in Python (the
database rounds a float's ties differently), a batch of ids at a time."""

from __future__ import annotations

from typing import Any

from django.db import migrations

BATCH = 1000


def round_could_save(apps: Any, schema_editor: Any) -> None:
    job_model = apps.get_model("jobs", "TrainingJob")
    last = 0
    while True:
        rows = list(
            job_model.objects.filter(pk__gt=last, could_save__isnull=False)
            .order_by("pk")
            .values_list("pk", "could_save")[:BATCH]
        )
        if not rows:
            return
        for pk, value in rows:
            if round(value, 2) != value:
                job_model.objects.filter(pk=pk).update(could_save=round(value, 2))
        last = rows[-1][0]


class Migration(migrations.Migration):
    dependencies = [("jobs", "0002_initial")]

    operations = [migrations.RunPython(round_could_save, migrations.RunPython.noop)]
