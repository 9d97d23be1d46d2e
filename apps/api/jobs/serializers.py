"""Job and cluster representations, and the input of job registration."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import tzinfo
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from apps.api.policies.serializers import InEffectSerializer, in_effect_output
from apps.core.api_inputs import StrictInputSerializer, dns_label_field, validation_error
from apps.core.api_output import api_datetime
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.listing import IN_EFFECT_STATES
from apps.policies.spec import DEFAULT_RELEASE, FRAMEWORKS, RELEASES
from mindcluster import keys as k
from mindcluster.operator_validation import MAX_REPLICAS

MAX_NPUS_PER_POD = 64


class ClusterOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "description",
            "is_default",
            "namespaces",
            "healthy",
            "health_message",
            "health_checked_at",
            "created_at",
        ]


class JobOutputSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", help_text="Cluster name")
    cluster_id = serializers.IntegerField()
    current_revision = serializers.SerializerMethodField(help_text="Number of the current policy revision")
    replicas = serializers.DictField(
        child=serializers.IntegerField(), help_text='e.g. {"Master": 1, "Worker": 3}'
    )
    npus_per_pod = serializers.IntegerField(min_value=0)  # declared: derived bounds differ per database
    strategies = serializers.SerializerMethodField(help_text="Strategies of the current revision, in order")
    in_effect_state = serializers.ChoiceField(
        choices=list(IN_EFFECT_STATES),
        help_text="Is the current revision in effect on the job (in-effect), written but waiting for a "
        "recreation (waiting), or not observed yet (unknown); the detail's in_effect says why",
    )

    class Meta:
        model = TrainingJob
        fields = [
            "id",
            "cluster",
            "cluster_id",
            "namespace",
            "name",
            "uid",
            "framework",
            "replicas",
            "npus_per_pod",
            "mindcluster_version",
            "phase",
            "source",
            "current_revision",
            "deleted_at",
            "created_at",
            "updated_at",
            "strategies",
            "in_effect_state",
            "last_fault_at",
        ]

    def get_strategies(self, job: TrainingJob) -> list[str]:
        return strategies_of(job.strategies)

    def get_current_revision(self, job: TrainingJob) -> int | None:
        # The job's revision is selected with it (lists go through job_row_output instead).
        return job.current_revision.number if job.current_revision is not None else None


class JobListOutputSerializer(JobOutputSerializer):
    """A row of the jobs list: the job plus the strategy-advice figure it can be sorted by."""

    could_save = serializers.FloatField(
        allow_null=True,
        help_text="NPU-hours/week the best candidate policy of strategy advice would save (null = not "
        "priced yet)",
    )

    class Meta(JobOutputSerializer.Meta):
        fields = [*JobOutputSerializer.Meta.fields, "could_save"]


def strategies_of(column: str) -> list[str]:
    return column.split(",") if column else []


# A page of the jobs list is read with ``values()``: 50 model instances run through
# ``JobOutputSerializer`` cost more than the page's queries. ``job_row_output`` shapes a row exactly as
# the serializer renders the job (tests compare the two); the OpenAPI schema still comes from the
# serializer. Columns are the serializer's fields, two of them read across a relation.
_COLUMN_OF = {
    "cluster": "cluster__name",
    "current_revision": "current_revision__number",
}
JOB_LIST_COLUMNS = tuple(_COLUMN_OF.get(name, name) for name in JobListOutputSerializer.Meta.fields)


def list_column_of(name: str) -> str:
    """The column (or relation path) an output field of a list row is read from."""
    return _COLUMN_OF.get(name, name)


# The fields rendered as DRF datetimes (here and by the database, apps/api/jobs/list_rows.py).
DATETIME_FIELDS = ("deleted_at", "created_at", "updated_at", "last_fault_at")


class JobDetailOutputSerializer(JobOutputSerializer):
    """One job, with what is in effect on it (design.md §4.4); lists leave it out (it reads history)."""

    in_effect = InEffectSerializer(read_only=True)

    class Meta(JobOutputSerializer.Meta):
        fields = [*JobOutputSerializer.Meta.fields, "in_effect"]


def job_detail_output(job: TrainingJob) -> dict[str, Any]:
    """``job_output`` plus ``in_effect``."""
    from apps.policies.in_effect import in_effect

    return {**job_output(job), "in_effect": in_effect_output(in_effect(job))}


def job_rows_output(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A page of ``values(*JOB_LIST_COLUMNS)`` rows, each as ``job_row_output`` renders it."""
    tz = timezone.get_current_timezone()
    return [job_row_output(row, tz=tz) for row in rows]


def job_row_output(
    row: dict[str, Any], fields: list[str] = JobListOutputSerializer.Meta.fields, tz: tzinfo | None = None
) -> dict[str, Any]:
    """One ``values(*JOB_LIST_COLUMNS)`` row as ``JobListOutputSerializer`` would render the job (or
    ``JobOutputSerializer``, given its ``fields``)."""
    out = {name: row[column] for name, column in _columns_of(fields)}
    out["replicas"] = {str(role): int(count) for role, count in (out["replicas"] or {}).items()}
    out["strategies"] = strategies_of(out["strategies"])
    if out.get("could_save") is not None:
        out["could_save"] = round(out["could_save"], 2)
    for name in DATETIME_FIELDS:
        out[name] = api_datetime(out[name], tz)
    return out


def _column_pairs(fields: list[str]) -> tuple[tuple[str, str], ...]:
    """(output name, row column) per field."""
    return tuple((name, _COLUMN_OF.get(name, name)) for name in fields)


# The two lists every page and detail render with, paired once.
_LIST_PAIRS = _column_pairs(JobListOutputSerializer.Meta.fields)
_DETAIL_PAIRS = _column_pairs(JobOutputSerializer.Meta.fields)


def _columns_of(fields: list[str]) -> tuple[tuple[str, str], ...]:
    if fields is JobListOutputSerializer.Meta.fields:
        return _LIST_PAIRS
    if fields is JobOutputSerializer.Meta.fields:
        return _DETAIL_PAIRS
    return _column_pairs(fields)


def job_output(job: TrainingJob) -> dict[str, Any]:
    """One job as ``JobOutputSerializer`` renders it, from an instance with cluster and revision loaded."""
    row = {column: getattr(job, column) for column in JOB_LIST_COLUMNS if "__" not in column}
    row["cluster__name"] = job.cluster.name
    row["current_revision__number"] = job.current_revision.number if job.current_revision else None
    return job_row_output(row, JobOutputSerializer.Meta.fields)


class JobRegisterInputSerializer(StrictInputSerializer):
    """``POST /jobs/``: a job to manage before (or without) adopting it from the cluster."""

    cluster = serializers.CharField(max_length=63, help_text="Cluster name (or id)")
    namespace = dns_label_field("namespace")
    name = dns_label_field("name")
    framework = serializers.ChoiceField(choices=list(FRAMEWORKS))
    replicas = serializers.DictField(
        child=serializers.IntegerField(min_value=0, max_value=MAX_REPLICAS),
        help_text='Replicas per role, e.g. {"Master": 1, "Worker": 3}',
    )
    npus_per_pod = serializers.IntegerField(min_value=0, max_value=MAX_NPUS_PER_POD, default=0)
    mindcluster_version = serializers.ChoiceField(choices=list(RELEASES), default=DEFAULT_RELEASE)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        framework = attrs["framework"]
        leader = k.LEADER_ROLE[framework]
        replicas: dict[str, int] = attrs["replicas"]
        if not replicas:
            raise validation_error("replicas", "At least one replica role is required.", "missing_field")
        for role in replicas:
            if role not in (leader, k.WORKER_ROLE):
                message = (
                    f"{role!r} is not a replica type of {framework} jobs; use {leader} and {k.WORKER_ROLE}."
                )
                raise validation_error(f"replicas.{role}", message, "invalid_choice")
        if leader in replicas and replicas[leader] != 1:
            message = f"The {leader} replica must have exactly 1 replica; the operator rejects anything else."
            raise validation_error(f"replicas.{leader}", message, "out_of_range")
        return attrs
