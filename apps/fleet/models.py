"""The fleet view's stored figures (design §4.8): per job and UTC day, and per namespace and UTC day.

They are kept as incidents close (``apps.fleet.summaries``), rebuilt from history on demand
(``manage.py fleet_rebuild``), and outlive the raw events and incidents they were made from
(``apps.fleet.retention`` prunes those, never these): the fleet page reads only these tables.

A ``JobDay`` exists only for a day the job had a closed incident (most job-days have none); a
``NamespaceDay`` holds the same figures summed over the namespace, plus the NPU time scheduled.
Lost time is stored in NPU-seconds per component; the rollback to the last checkpoint is stored as
the NPUs that restarted from it (``rollback_npus``), priced at read time with the view's checkpoint
period, exactly as the strategy advice takes it as a parameter.
"""

from __future__ import annotations

from django.db import models


class Figures(models.Model):
    faults = models.PositiveIntegerField(default=0, help_text="Closed incidents that opened this day")
    detection_npu_s = models.FloatField(default=0.0, help_text="fault → training stopped, x NPUs")
    decision_npu_s = models.FloatField(default=0.0, help_text="stopped → strategy chosen, x NPUs")
    recovery_npu_s = models.FloatField(default=0.0, help_text="chosen → running again (or failed), x NPUs")
    rollbacks = models.PositiveIntegerField(default=0, help_text="Incidents that restarted from a checkpoint")
    rollback_npus = models.PositiveIntegerField(default=0, help_text="NPUs of those incidents, summed")
    by_kind = models.JSONField(default=dict, blank=True, help_text="{fault kind: incidents}")
    recoveries = models.JSONField(default=dict, blank=True, help_text="{outcome: incidents}")
    by_strategy = models.JSONField(default=dict, blank=True, help_text="{final strategy: {outcome: n}}")
    mttr = models.JSONField(
        default=dict,
        blank=True,
        help_text="{final strategy: {bucket: recoveries}}: fault → running, histogram (apps.fleet.histogram)",
    )
    sources = models.JSONField(default=dict, blank=True, help_text="{component: {source: incidents}}")

    class Meta:
        abstract = True


RANKING_COLUMNS = [
    "cluster",
    "namespace",
    "faults",
    "detection_npu_s",
    "decision_npu_s",
    "recovery_npu_s",
    "rollback_npus",
]


class JobDay(Figures):
    job = models.ForeignKey("jobs.TrainingJob", on_delete=models.CASCADE, related_name="fleet_days")
    day = models.DateField()
    # Copied from the job: the view filters and scopes by them without a join.
    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=63)
    npus = models.PositiveIntegerField(help_text="The job's NPUs when its incidents were counted")

    class Meta:
        # The ranking of the jobs that lost most reads only the scope and the lost columns: both
        # indexes carry them, so it is an index-only scan, never of the wide rows (their JSON) wherever
        # they lie on disk. A long window walks (job, day) in job order and sums each job's days as
        # they come (no hash table of every job); a short one takes its few days from (day, job).
        constraints = [
            models.UniqueConstraint(fields=["job", "day"], name="uniq_fleet_job_day", include=RANKING_COLUMNS)
        ]
        indexes = [
            models.Index(fields=["day", "cluster", "namespace"], name="fleet_jobday_scope"),
            models.Index(fields=["day", "job"], include=RANKING_COLUMNS, name="fleet_jobday_ranking"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} on {self.day}: {self.faults} faults"


class NamespaceDay(Figures):
    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=63)
    day = models.DateField()
    npu_s_scheduled = models.FloatField(default=0.0, help_text="NPUs x seconds the namespace's jobs existed")
    jobs = models.PositiveIntegerField(default=0, help_text="Jobs that existed at some time of the day")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "namespace", "day"], name="uniq_fleet_namespace_day")
        ]
        indexes = [models.Index(fields=["day"], name="fleet_nsday_day")]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.namespace} on {self.day}"


class Span(models.TextChoices):
    DAY = "d", "day"
    WEEK = "w", "ISO week (Monday to Sunday)"


class NamespaceCount(models.Model):
    """One count of a namespace's ``NamespaceDay`` JSON maps, as a narrow row, per day and per week.

    The same figures as the maps (``by_kind``, ``recoveries``, ``by_strategy``, ``sources``, ``mttr``),
    kept beside them in the same transaction (``apps.fleet.counts``), so the fleet view sums them with
    a plain ``GROUP BY`` over an index-only scan instead of unpacking JSON row by row. A week row
    (``span`` "w", ``day`` its Monday) holds the sum of its seven day rows: a 90-day window reads
    about 13 weeks and the edge days instead of 90 days of every namespace.
    """

    span = models.CharField(max_length=1, choices=Span.choices)
    measure = models.CharField(max_length=8, help_text="kind, recovery, strategy, source or mttr")
    day = models.DateField(help_text="The day, or the Monday of the week")
    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=63)
    parent = models.CharField(max_length=63, blank=True, help_text="Outer key of a nested map, else ''")
    item = models.CharField(max_length=63, help_text="The counted key (a kind, an outcome, a bucket...)")
    count = models.IntegerField()

    class Meta:
        # The view's scans name span, measure and a day range: these lead, and the count rides along
        # in the index, so the sums never touch the table's pages.
        constraints = [
            models.UniqueConstraint(
                fields=["span", "measure", "day", "cluster", "namespace", "parent", "item"],
                name="uniq_fleet_namespace_count",
                include=["count"],
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.namespace} {self.span} {self.day}: {self.measure} {self.item}"
