"""``GET /jobs/`` filters: cluster (name or id), namespace, phase, free text ``q``, ``could_save_min``."""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from apps.core.numbers import is_ascii_digits
from apps.jobs.models import TrainingJob

_MAX_ID_DIGITS = 18  # beyond a bigint: cannot be an id, so treat it as a name


class JobFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(
        method="filter_cluster", max_length=63, help_text="Cluster name or id"
    )
    namespace = django_filters.CharFilter(field_name="namespace", max_length=63)
    phase = django_filters.CharFilter(field_name="phase", max_length=32)
    q = django_filters.CharFilter(
        method="filter_q", max_length=100, help_text="Substring of name or namespace"
    )
    could_save_min = django_filters.NumberFilter(
        field_name="advice_summary__could_save",
        lookup_expr="gte",
        min_value=0,
        help_text="Only jobs whose best candidate policy could save at least this many NPU-hours/week "
        "(strategy advice, recomputed after new incidents)",
    )
    include_deleted = django_filters.BooleanFilter(
        method="filter_deleted", help_text="Also list jobs that have left the cluster"
    )

    class Meta:
        model = TrainingJob
        fields: list[str] = []

    def filter_queryset(self, queryset: QuerySet[TrainingJob]) -> QuerySet[TrainingJob]:
        if not self.form.cleaned_data.get("include_deleted"):
            queryset = queryset.filter(deleted_at__isnull=True)
        return super().filter_queryset(queryset)

    def filter_cluster(self, queryset: QuerySet[TrainingJob], name: str, value: str) -> QuerySet[TrainingJob]:
        match = Q(cluster__name=value)
        if is_ascii_digits(value) and len(value) <= _MAX_ID_DIGITS:
            match |= Q(cluster_id=int(value))
        return queryset.filter(match)

    def filter_q(self, queryset: QuerySet[TrainingJob], name: str, value: str) -> QuerySet[TrainingJob]:
        return queryset.filter(Q(name__icontains=value) | Q(namespace__icontains=value))

    def filter_deleted(
        self, queryset: QuerySet[TrainingJob], name: str, value: bool
    ) -> QuerySet[TrainingJob]:
        return queryset  # applied in filter_queryset, which sees whether the flag was given at all
