"""Clusters the control plane talks to, and the AscendJobs it manages in them."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from apps.core.model_parts import NullsLastIndex
from mindcluster.keys import FRAMEWORKS
from mindcluster.releases import DEFAULT_RELEASE, RELEASES


class Cluster(models.Model):
    """A Kubernetes cluster running MindCluster, reached through a kubeconfig or in-cluster config."""

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=200, blank=True)
    kubeconfig_path = models.CharField(
        max_length=500, blank=True, help_text="Path to a kubeconfig file; empty with in_cluster for a pod."
    )
    context = models.CharField(max_length=200, blank=True, help_text="kubeconfig context; empty = current.")
    in_cluster = models.BooleanField(default=False)
    clusterd_address = models.CharField(
        max_length=200, blank=True, help_text="host:port of ClusterD's gRPC service (8899), if reachable."
    )
    namespaces = models.JSONField(
        default=list, blank=True, help_text="Namespaces to watch and adopt jobs from; empty = all."
    )
    auto_heal = models.BooleanField(default=False, help_text="Re-push the policy when drift is detected.")
    is_default = models.BooleanField(default=False)
    healthy = models.BooleanField(null=True, default=None)
    health_message = models.CharField(max_length=500, blank=True)
    health_checked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TrainingJob(models.Model):
    """An AscendJob in a cluster namespace, registered by hand or adopted from the cluster."""

    class Framework(models.TextChoices):
        PYTORCH = "pytorch"
        MINDSPORE = "mindspore"
        TENSORFLOW = "tensorflow"

    class Source(models.TextChoices):
        REGISTERED = "registered"
        ADOPTED = "adopted"

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="jobs")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True, help_text="metadata.uid of the live AscendJob")
    framework = models.CharField(max_length=20, choices=Framework.choices, default=Framework.PYTORCH)
    replicas = models.JSONField(
        default=dict, blank=True, help_text='Replica count per role, e.g. {"Master": 1}'
    )
    npus_per_pod = models.PositiveIntegerField(default=0)
    mindcluster_version = models.CharField(
        max_length=8, choices=[(r, r) for r in RELEASES], default=DEFAULT_RELEASE
    )
    phase = models.CharField(max_length=32, blank=True, help_text="Last AscendJob condition type")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.REGISTERED)
    current_revision = models.ForeignKey(
        "policies.PolicyRevision", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    deleted_at = models.DateTimeField(null=True, blank=True, help_text="Set when the job left the cluster")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Copies kept for the jobs list alone, so it can sort and filter 100,000 jobs on an index. Their
    # owners are elsewhere: the current revision's spec, the in-effect comparison
    # (apps/policies/in_effect.py), the job's incidents (apps/policies/listing.py keeps those in
    # step), and the advice summary (apps/advice/services.py summary_store writes both).
    strategies = models.CharField(
        max_length=200, blank=True, default="", help_text="The current revision's strategies, comma-joined"
    )
    in_effect_state = models.CharField(
        max_length=16, default="unknown", help_text="in-effect, waiting (for a recreation) or unknown"
    )
    last_fault_at = models.DateTimeField(null=True, blank=True, help_text="When the newest incident opened")
    could_save = models.FloatField(
        null=True,
        blank=True,
        help_text="The advice summary's NPU-hours/week (apps/advice); null = not priced",
    )

    class Meta:
        ordering = ["cluster__name", "namespace", "name"]
        constraints = [
            # A deleted job keeps its history; a new job with the same name is a new row.
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"],
                condition=Q(deleted_at__isnull=True),
                name="uniq_live_job_per_namespace",
            ),
            models.CheckConstraint(condition=Q(framework__in=list(FRAMEWORKS)), name="job_framework_known"),
        ]
        indexes = [
            models.Index(fields=["cluster", "namespace"]),
            models.Index(fields=["uid"]),
            # The jobs list's order: its pages (ids) and its count are index-only scans.
            models.Index(
                fields=["cluster", "namespace", "name", "id"],
                condition=Q(deleted_at__isnull=True),
                name="job_live_list_order",
            ),
            # One index per sort of the jobs list (apps/api/jobs/ordering.py): a page is a walk along
            # it. The visibility filter's columns are included, so a walk with that filter (every
            # non-superuser's) stays an index-only scan instead of sorting every visible job.
            *(
                NullsLastIndex(
                    *key,
                    F("id").desc() if descending else F("id"),
                    condition=Q(deleted_at__isnull=True),
                    include=["cluster_id", "namespace"],
                    name=f"job_live_by_{name}",
                )
                for name, key, descending in (
                    ("name", [F("name")], False),
                    ("namespace", [F("namespace"), F("name")], False),
                    ("phase", [F("phase"), F("name")], False),
                    ("strategies", [F("strategies"), F("name")], False),
                    ("in_effect", [F("in_effect_state"), F("name")], False),
                    ("created", [F("created_at")], False),
                    ("last_fault", [F("last_fault_at")], False),
                    # Newest fault, biggest saving first, the empty ones last: ASC's backward scan
                    # would put those first.
                    ("last_fault_desc", [F("last_fault_at").desc(nulls_last=True)], True),
                    ("could_save", [F("could_save")], False),
                    ("could_save_desc", [F("could_save").desc(nulls_last=True)], True),
                )
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.namespace}/{self.name}"

    @property
    def node_nums(self) -> int:
        """Total pods across replica roles (TaskD ``node_nums``)."""
        return sum(int(v) for v in self.replicas.values())


class LiveJobCount(models.Model):
    """How many live jobs (``deleted_at`` null) a (cluster, namespace) holds: the jobs list's total.

    Written only by PostgreSQL, in the transaction that changes the jobs (statement triggers on
    ``jobs_trainingjob``, migration 0004), so a count read with a page is exact in that page's
    snapshot; summing a user's namespaces replaces a COUNT over every visible job (0.8 ms of
    PostgreSQL's CPU per page at 10,000 jobs, bench/bench_api.py). The columns are named like the
    job's, so the visibility filter (apps/accounts/selectors.py ``namespace_coverage``) applies to
    both. No foreign key: a count can outlive nothing, and rows at zero are harmless. Not kept on
    SQLite (the embedded default counts the jobs).
    """

    cluster_id = models.BigIntegerField()
    namespace = models.CharField(max_length=63)
    live = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster_id", "namespace"], name="uniq_live_job_count"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.namespace}: {self.live} live"


class JobIncarnation(models.Model):
    """What one incarnation (one uid) of a job was created with, as the cluster showed it.

    MindCluster reads most recovery keys once: the operator when it creates the job and copies the
    job's keys to the PodGroup, ClusterD at the job's first ``Init``. So what is *in effect* is read
    here — the PodGroup as first seen (before any push of ours), the job's restart-budget keys as first
    seen, ClusterD's Init snapshot when it is observable — never from what we wrote later.
    """

    job = models.ForeignKey(TrainingJob, on_delete=models.CASCADE, related_name="incarnations")
    uid = models.CharField(max_length=64, help_text="metadata.uid of the AscendJob")
    job_created_at = models.DateTimeField(null=True, blank=True, help_text="AscendJob creationTimestamp")
    job_keys = models.JSONField(
        default=dict,
        blank=True,
        help_text="backoffLimit and fault-retry-times as first seen (operator, at creation)",
    )
    podgroup_uid = models.CharField(max_length=64, blank=True)
    podgroup_created_at = models.DateTimeField(null=True, blank=True)
    podgroup_keys = models.JSONField(
        default=dict,
        blank=True,
        help_text="The PodGroup's labels/annotations as first seen (copied at creation)",
    )
    podgroup_seen_by = models.CharField(max_length=16, blank=True, help_text="ingester, push or preview")
    init_keys = models.JSONField(default=dict, blank=True, help_text="ClusterD's Init snapshot, if observed")
    init_at = models.DateTimeField(null=True, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["job", "-first_seen_at"]
        constraints = [models.UniqueConstraint(fields=["job", "uid"], name="uniq_incarnation_per_uid")]

    def __str__(self) -> str:
        return f"{self.job} uid={self.uid}"
