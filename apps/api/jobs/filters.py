"""``GET /jobs/`` filters: cluster (name or id), namespace, phase, strategy, in-effect state, recovering,
free text ``q`` and ``could_save_min``. A value outside a fixed set is a 400 naming the parameter and
listing the values it takes."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Exists, OuterRef, Q, QuerySet

from apps.core.api_errors import field_error
from apps.core.numbers import is_ascii_digits
from apps.events.models import Incident
from apps.jobs.models import TrainingJob
from apps.policies.listing import IN_EFFECT_STATES
from mindcluster.strategies import STRATEGIES

NO_STRATEGY = "none"
STRATEGY_CHOICES = (*STRATEGIES, NO_STRATEGY)


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise field_error(
            name,
            f"{name} must be one of {', '.join(allowed)}; got {value[:40]!r}.",
            "invalid_choice",
            list(allowed),
        )
    return value


_MAX_ID_DIGITS = 18  # beyond a bigint: cannot be an id, so treat it as a name


class JobFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(
        method="filter_cluster", max_length=63, help_text="Cluster name or id"
    )
    namespace = django_filters.CharFilter(field_name="namespace", max_length=63)
    phase = django_filters.CharFilter(field_name="phase", max_length=32)
    strategy = django_filters.CharFilter(
        method="filter_strategy",
        max_length=32,
        help_text=f"Jobs whose current policy has this strategy ({NO_STRATEGY}: none at all); one of "
        + ", ".join(STRATEGY_CHOICES),
    )
    in_effect = django_filters.CharFilter(
        method="filter_in_effect",
        max_length=16,
        help_text="Is the current revision in effect: " + ", ".join(IN_EFFECT_STATES),
    )
    recovering = django_filters.CharFilter(
        method="filter_recovering",
        max_length=5,
        help_text="Only jobs with an open incident (true) or without one (false)",
    )
    q = django_filters.CharFilter(
        method="filter_q", max_length=100, help_text="Substring of name or namespace"
    )
    could_save_min = django_filters.NumberFilter(
        field_name="could_save",
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
            queryset = self.unfiltered(queryset)
        return super().filter_queryset(queryset)

    @staticmethod
    def unfiltered(queryset: QuerySet[TrainingJob]) -> QuerySet[TrainingJob]:
        """What the filters leave when none is given: the jobs still on their cluster."""
        return queryset.filter(deleted_at__isnull=True)

    @classmethod
    def any_given(cls, params: Any) -> bool:
        """Whether ``params`` (a request's query) names any of these filters."""
        return any(name in params for name in cls.base_filters)

    def filter_cluster(self, queryset: QuerySet[TrainingJob], name: str, value: str) -> QuerySet[TrainingJob]:
        match = Q(cluster__name=value)
        if is_ascii_digits(value) and len(value) <= _MAX_ID_DIGITS:
            match |= Q(cluster_id=int(value))
        return queryset.filter(match)

    def filter_strategy(
        self, queryset: QuerySet[TrainingJob], name: str, value: str
    ) -> QuerySet[TrainingJob]:
        # The column is comma-joined (apps/policies/listing.py): match a whole element.
        if _one_of(name, value, STRATEGY_CHOICES) == NO_STRATEGY:
            return queryset.filter(strategies="")
        return queryset.filter(
            Q(strategies=value)
            | Q(strategies__startswith=f"{value},")
            | Q(strategies__endswith=f",{value}")
            | Q(strategies__contains=f",{value},")
        )

    def filter_in_effect(
        self, queryset: QuerySet[TrainingJob], name: str, value: str
    ) -> QuerySet[TrainingJob]:
        return queryset.filter(in_effect_state=_one_of(name, value, IN_EFFECT_STATES))

    def filter_recovering(
        self, queryset: QuerySet[TrainingJob], name: str, value: str
    ) -> QuerySet[TrainingJob]:
        # An EXISTS on the one_open_incident_per_job index: open incidents are few.
        open_incident = Exists(Incident.objects.filter(job=OuterRef("pk"), closed_at__isnull=True))
        wanted = _one_of(name, value, ("true", "false")) == "true"
        return queryset.filter(open_incident if wanted else ~open_incident)

    def filter_q(self, queryset: QuerySet[TrainingJob], name: str, value: str) -> QuerySet[TrainingJob]:
        return queryset.filter(Q(name__icontains=value) | Q(namespace__icontains=value))

    def filter_deleted(
        self, queryset: QuerySet[TrainingJob], name: str, value: bool
    ) -> QuerySet[TrainingJob]:
        return queryset  # applied in filter_queryset, which sees whether the flag was given at all
