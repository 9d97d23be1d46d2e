"""The ranking of the jobs that lost most as an index-only scan: the unique (job, day) index and a new
(day, job) one carry the scope and the lost columns (``JobDay.Meta``)."""

from django.db import migrations, models

COLUMNS = ("cluster", "namespace", "faults", "detection_npu_s", "decision_npu_s", "recovery_npu_s", "rollback_npus")


class Migration(migrations.Migration):
    dependencies = [("fleet", "0003_mttr_histograms"), ("jobs", "0002_initial")]

    operations = [
        migrations.RemoveConstraint(model_name="jobday", name="uniq_fleet_job_day"),
        migrations.AddIndex(
            model_name="jobday",
            index=models.Index(fields=["day", "job"], include=COLUMNS, name="fleet_jobday_ranking"),
        ),
        migrations.AddConstraint(
            model_name="jobday",
            constraint=models.UniqueConstraint(fields=("job", "day"), include=COLUMNS, name="uniq_fleet_job_day"),
        ),
    ]
