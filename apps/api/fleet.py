"""``GET /api/v1/fleet/``: what faults cost the fleet over a window (design §4.8; viewer of what it
covers: jobs the caller may not see are not counted). Reads only the stored fleet summaries."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import clusters_visible_to
from apps.advice import assumptions as A
from apps.api.advice import AssumptionSerializer, VariedSpecSerializer, int_param
from apps.core.api_errors import ErrorResponseSerializer, field_error
from apps.core.api_inputs import DNS1123_LABEL
from apps.core.numbers import is_ascii_digits
from apps.fleet import histogram
from apps.fleet.services import Scope, fleet_view
from apps.jobs.models import Cluster

PARAMETERS = ("window_days", "cluster", "namespace", "checkpoint_period_s")
WINDOW_DAYS_BOUNDS = A.WINDOW_DAYS_BOUNDS
RESOLUTION_PCT = round(histogram.RELATIVE_RESOLUTION * 100, 1)


class FleetLostSerializer(serializers.Serializer):
    total = serializers.FloatField(help_text="NPU-hours: detection + decision + recovery + rollback")
    detection = serializers.FloatField(help_text="fault → training stopped")
    decision = serializers.FloatField(help_text="stopped → strategy chosen")
    recovery = serializers.FloatField(help_text="chosen → training running again (or the job failed)")
    rollback = serializers.FloatField(
        help_text="restarts from the last checkpoint x half a checkpoint period"
    )
    rollbacks = serializers.IntegerField(help_text="Incidents that restarted from a checkpoint")
    sources = serializers.DictField(
        child=serializers.DictField(child=serializers.IntegerField()),
        help_text="{component: {measured|published|model|default: incidents}}",
    )


class FleetBucketSerializer(serializers.Serializer):
    start = serializers.DateField(help_text="UTC day")
    total = serializers.IntegerField()
    by_kind = serializers.DictField(child=serializers.IntegerField())


class FleetFaultsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    by_kind = serializers.DictField(child=serializers.IntegerField())
    buckets = FleetBucketSerializer(
        many=True,
        required=False,
        help_text="One per UTC day of the window, oldest first (the total and each cluster; for one "
        "namespace's, ask for it with ?namespace=)",
    )


class FleetMttrSerializer(serializers.Serializer):
    median = serializers.FloatField(help_text=f"Seconds; resolution ±{RESOLUTION_PCT} % (see mttr_seconds)")
    p90 = serializers.FloatField(help_text=f"Seconds; resolution ±{RESOLUTION_PCT} %")
    samples = serializers.IntegerField(help_text="Recoveries counted (failed incidents are not recoveries)")


class FleetRecoveriesSerializer(serializers.Serializer):
    by_outcome = serializers.DictField(
        child=serializers.IntegerField(), help_text="recovered, rescheduled, failed"
    )
    by_strategy = serializers.DictField(
        child=serializers.DictField(child=serializers.IntegerField()),
        help_text="{strategy that ended the incident: {outcome: incidents}}",
    )


class FleetFiguresSerializer(serializers.Serializer):
    npu_hours_scheduled = serializers.FloatField(help_text="NPUs x hours the jobs existed in the window")
    npu_hours_lost = FleetLostSerializer()
    effective_training_ratio = serializers.FloatField(allow_null=True, help_text="1 - lost / scheduled")
    faults = FleetFaultsSerializer()
    mttr_seconds = serializers.DictField(
        child=FleetMttrSerializer(),
        help_text="{strategy that ended the incident: fault → running again}. Durations are kept as "
        f"histograms ({histogram.BUCKETS_PER_DOUBLING} logarithmic buckets per doubling), each shown as its "
        "bucket's geometric middle; median and p90 interpolate between ranks like PostgreSQL's "
        f"percentile_cont over those values: within {RESOLUTION_PCT} % of the raw durations' figure.",
    )
    recoveries = FleetRecoveriesSerializer()
    jobs_url = serializers.CharField(help_text="The jobs overview filtered to these jobs")


class FleetClusterFiguresSerializer(FleetFiguresSerializer):
    cluster = serializers.CharField()
    cluster_id = serializers.IntegerField()


class FleetNamespaceFiguresSerializer(FleetClusterFiguresSerializer):
    namespace = serializers.CharField()


class FleetTopJobSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    name = serializers.CharField()
    cluster = serializers.CharField()
    namespace = serializers.CharField()
    deleted = serializers.BooleanField()
    faults = serializers.IntegerField()
    npu_hours_lost = serializers.FloatField()
    npu_hours_lost_rollback = serializers.FloatField()
    could_save = serializers.FloatField(
        allow_null=True, help_text="NPU-hours/week its strategy advice's best policy saves (null: not priced)"
    )
    advice_best = VariedSpecSerializer(allow_null=True)
    url = serializers.CharField()
    advice_url = serializers.CharField()


class FleetWindowSerializer(serializers.Serializer):
    days = serializers.IntegerField()
    start = serializers.DateField()
    end = serializers.DateField()
    bucket = serializers.CharField()
    timezone = serializers.CharField()


class FleetModelSerializer(serializers.Serializer):
    description = serializers.CharField()
    assumptions = AssumptionSerializer(many=True)


class FleetSerializer(serializers.Serializer):
    window = FleetWindowSerializer()
    filters = serializers.DictField(child=serializers.CharField(allow_null=True))
    model = FleetModelSerializer(help_text="How lost NPU-hours are counted, and the figures it uses")
    total = FleetFiguresSerializer()
    clusters = FleetClusterFiguresSerializer(many=True)
    namespaces = FleetNamespaceFiguresSerializer(many=True)
    top_jobs = FleetTopJobSerializer(many=True, help_text="Most NPU-hours lost first (at most 10)")


def _cluster(request: Request) -> Cluster | None:
    raw = request.query_params.get("cluster", "").strip()
    if not raw:
        return None
    visible = clusters_visible_to(request.user)
    found = visible.filter(name=raw[:63]).first()
    if found is None and is_ascii_digits(raw) and len(raw) <= 18:
        found = visible.filter(pk=int(raw)).first()
    if found is None:
        names = list(visible.order_by("name").values_list("name", flat=True)[:100])
        raise field_error("cluster", f"No cluster {raw[:63]!r} that you may see.", "not_found", allowed=names)
    return found


def _namespace(request: Request) -> str | None:
    raw = request.query_params.get("namespace", "").strip()
    if not raw:
        return None
    if len(raw) > 63 or not DNS1123_LABEL.match(raw):
        raise field_error(
            "namespace", "A namespace is a DNS-1123 label: lower-case letters, digits and '-', at most 63."
        )
    return raw


@extend_schema(
    tags=["fleet"],
    summary="The fleet: NPU-hours scheduled and lost to faults, faults over time, MTTR, the costliest jobs",
    parameters=[
        OpenApiParameter(
            "window_days",
            int,
            description=f"UTC days up to today (default 7, {WINDOW_DAYS_BOUNDS[0]}-{WINDOW_DAYS_BOUNDS[1]})",
        ),
        OpenApiParameter("cluster", str, description="Only this cluster (name or id)"),
        OpenApiParameter("namespace", str, description="Only this namespace"),
        OpenApiParameter(
            "checkpoint_period_s",
            int,
            description="Seconds between checkpoints, for the rollback (default 3600)",
        ),
    ],
    responses={200: FleetSerializer, 400: ErrorResponseSerializer},
)
class FleetApi(APIView):
    def get(self, request: Request) -> Response:
        for name in request.query_params:
            if name not in PARAMETERS:
                raise field_error(
                    name, f"Unknown parameter {name[:40]!r}.", "unknown", allowed=list(PARAMETERS)
                )
        window = int_param(request, "window_days", WINDOW_DAYS_BOUNDS, "days")
        period = int_param(request, "checkpoint_period_s", A.CHECKPOINT_PERIOD_BOUNDS, "seconds")
        scope = Scope(
            window_days=window or 7,
            cluster=_cluster(request),
            namespace=_namespace(request),
            checkpoint_period_s=period,
        )
        return Response(fleet_view(request.user, scope))


urlpatterns = [path("fleet/", FleetApi.as_view(), name="fleet")]
