"""Time to recovery stored as histograms ({strategy: {bucket: count}}) instead of every duration.

Existing rows are converted in place: each stored duration is counted in its bucket
(``apps.fleet.histogram``), so the figures stay what they were, to the histogram's resolution.
"""

from typing import Any

from django.db import migrations, models

from apps.fleet import histogram

HELP = "{final strategy: {bucket: recoveries}}: fault → running, histogram (apps.fleet.histogram)"


def _to_histograms(apps: Any, schema_editor: Any) -> None:
    for name in ("JobDay", "NamespaceDay"):
        model = apps.get_model("fleet", name)
        changed = []
        for row in model.objects.exclude(mttr={}).only("pk", "mttr").iterator(chunk_size=2_000):
            converted: dict[str, dict[str, int]] = {}
            for strategy, values in (row.mttr or {}).items():
                if not isinstance(values, list):
                    converted[strategy] = values  # already a histogram
                    continue
                counts: dict[str, int] = {}
                for seconds in values:
                    key = str(histogram.bucket(float(seconds)))
                    counts[key] = counts.get(key, 0) + 1
                converted[strategy] = dict(sorted(counts.items()))
            row.mttr = converted
            changed.append(row)
            if len(changed) >= 2_000:
                model.objects.bulk_update(changed, ["mttr"])
                changed = []
        model.objects.bulk_update(changed, ["mttr"])


class Migration(migrations.Migration):
    dependencies = [("fleet", "0002_initial")]

    operations = [
        *(
            migrations.AlterField(
                model_name=model_name,
                name="mttr",
                field=models.JSONField(blank=True, default=dict, help_text=HELP),
            )
            for model_name in ("jobday", "namespaceday")
        ),
        migrations.RunPython(_to_histograms, migrations.RunPython.noop),
    ]
