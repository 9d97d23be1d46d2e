"""Writing observations: resolve the job, diff against the stored object state, store (the events
domain chooses the incident).

Every write for one object happens in one transaction holding that object's ``ObservedObject`` row
lock, and every event takes the job row lock (``event_store``), so two ingesters, or one replaying
after ``kill -9``, produce each event exactly once: the second writer finds the state already
advanced (no diff) or the dedupe key already stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps as django_apps
from django.db import transaction

from apps.clusterd.client import FaultSignal
from apps.core.numbers import is_ascii_digits
from apps.events import incident_services, kinds, rows
from apps.events.models import JobEvent, ObservedObject
from apps.events.services import event_store, source_keys_prune
from apps.ingest import (
    ascendjobs,
    clusterd_faults,
    init_snapshot,
    k8s_events,
    podgroups,
    reschedule_reason,
    reset_config,
)
from apps.ingest.items import Listing
from apps.ingest.observation import JobRef, Observation
from apps.jobs.incarnations import incarnation_observe_init, incarnation_observe_podgroup
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.adoption import (
    job_adopt_converging,
    job_adopt_from_cluster,
    job_mark_deleted,
    jobs_mark_gone,
)

log = logging.getLogger(__name__)

Differ = Callable[[dict[str, Any], Any, datetime], tuple[dict[str, Any], list[Observation]]]
CLUSTERD_KIND = "clusterd-fault"


def clusterd_faulty_jobs(cluster: Cluster) -> set[str]:
    """The jobs (AscendJob uids) whose stored ClusterD fault set is not empty.

    ClusterD's stream repeats, on subscribe, the faults of the jobs that have some: a job whose
    faults cleared while nobody listened is simply absent, and its stored set would stay stale.
    """
    rows_ = ObservedObject.objects.filter(cluster=cluster, kind=CLUSTERD_KIND).values_list("name", "state")
    return {name for name, state in rows_ if isinstance(state, dict) and state.get("faults")}


def rv_is_newer(new: str, old: str) -> bool:
    """resourceVersions are opaque, but every API server in practice uses integers: compare them so."""
    if not old:
        return True
    if is_ascii_digits(new) and is_ascii_digits(old):
        return int(new) > int(old)
    return new != old


class IngestStore:
    """Stores observations for one cluster; safe to run in several processes at once."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._jobs: dict[tuple[str, str], TrainingJob] = {}
        self._jobs_by_uid: dict[str, TrainingJob] = {}
        self.decisions_enabled = django_apps.is_installed("apps.decisions")

    # --- jobs -------------------------------------------------------------------------------------
    def remember(self, job: TrainingJob) -> None:
        self._jobs[(job.namespace, job.name)] = job
        if job.uid:
            self._jobs_by_uid[job.uid] = job

    def forget(self, namespace: str, name: str) -> None:
        job = self._jobs.pop((namespace, name), None)
        if job is not None and job.uid:
            self._jobs_by_uid.pop(job.uid, None)

    def watches(self, namespace: str) -> bool:
        """Whether ``namespace`` is one of this cluster's (every namespace when it names none)."""
        return not self.cluster.namespaces or namespace in self.cluster.namespaces

    def resolve_job(self, ref: JobRef) -> TrainingJob | None:
        """The live job row for ``ref``, adopting the AscendJob from the cluster if we have not yet.

        None for a job in a namespace this cluster does not watch: ``mindx-dl/job-reschedule-reason``
        is one ConfigMap for the whole cluster, keyed ``<ns>/<name>-<uid>`` for every namespace's jobs,
        and a report about another namespace's job must not adopt it here."""
        if ref.namespace and not self.watches(ref.namespace):
            return None
        if ref.uid and ref.uid in self._jobs_by_uid:
            return self._jobs_by_uid[ref.uid]
        if ref.name and (ref.namespace, ref.name) in self._jobs:
            cached = self._jobs[(ref.namespace, ref.name)]
            if not ref.uid or not cached.uid or cached.uid == ref.uid:
                return cached
        live = TrainingJob.objects.filter(cluster=self.cluster, deleted_at__isnull=True).select_related(
            "cluster"
        )
        job = live.filter(uid=ref.uid).first() if ref.uid else None
        if job is None and ref.name:
            job = live.filter(namespace=ref.namespace, name=ref.name).first()
        if job is None and ref.name and ref.namespace:
            job = job_adopt_from_cluster(cluster=self.cluster, namespace=ref.namespace, name=ref.name)
        if job is not None:
            self.remember(job)
        return job

    def job_key(self, ref: JobRef) -> str:
        """A key for the job ``ref`` names, without a query: its uid when known (from ``ref`` or a
        job already resolved by name), else ``namespace/name``."""
        if ref.uid:
            return ref.uid
        cached = self._jobs.get((ref.namespace, ref.name))
        return cached.uid if cached is not None and cached.uid else f"{ref.namespace}/{ref.name}"

    def opens_an_incident(self, ref: JobRef) -> bool:
        """Whether a new fault report of the job ``ref`` names would open an incident of its own
        (``apps.ingest.express``): the job is known, with no open incident and none just closed."""
        job = self.resolve_job(ref)
        return job is not None and incident_services.incident_none_recent(job)

    def adopt(self, manifest: dict[str, Any]) -> TrainingJob | None:
        """Create or refresh the job row (a second ingester replaying the same event converges on it)."""
        job = job_adopt_converging(cluster=self.cluster, manifest=manifest)
        if job is not None:
            self.remember(job)
        return job

    # --- one observation --------------------------------------------------------------------------
    def record(self, obs: Observation) -> JobEvent | None:
        """Store one observation as a typed event (None: duplicate, merged into its incident, or no job)."""
        job = self.resolve_job(obs.job)
        if job is None:
            log.debug("no job for %s observation %s", obs.kind, obs.job)
            return None
        if obs.kind == kinds.DECISION_REQUESTED and self.decisions_enabled:
            return None  # apps.decisions records the question (with its own answer) from the PodGroup
        kind, data, key = obs.kind, {**obs.data, "sources": [obs.source]}, obs.dedupe_key
        if kind == kinds.POD_RESCHEDULED and job.node_nums and len(data.get("pods") or []) >= job.node_nums:
            kind = kinds.JOB_RESCHEDULED
        # A Kubernetes Event is handled once, whatever replays it; the events domain chooses the
        # incident (and the stored kind and key) under the job's lock.
        remembered = obs.dedupe_key if obs.source == k8s_events.SOURCE else ""
        return event_store(
            job=job,
            kind=kind,
            message=obs.message,
            source=obs.source,
            severity=obs.severity or None,
            data=data,
            occurred_at=obs.occurred_at,
            dedupe_key=key,
            source_key=remembered,
        )

    # --- level-triggered objects ------------------------------------------------------------------
    def _observed(self, kind: str, namespace: str, name: str) -> ObservedObject:
        """The locked state row of one object (created on first sight: one upsert either way, which
        another ingester creating it first cannot fail)."""
        return rows.observed_lock(self.cluster.pk, kind, namespace, name)

    def apply_object(
        self, kind: str, obj: dict[str, Any], differ: Differ, received_at: datetime
    ) -> tuple[dict[str, Any], dict[str, Any], list[JobEvent]]:
        """Diff ``obj`` against its stored state and store the difference; (previous, new, events)."""
        meta = obj.get("metadata") or {}
        uid, rv = str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))
        with transaction.atomic():
            observed = self._observed(kind, str(meta.get("namespace", "")), str(meta.get("name", "")))
            same_object = observed.uid == uid
            if same_object and rv and not rv_is_newer(rv, observed.resource_version):
                return observed.state, observed.state, []  # seen already (replay, relist, other ingester)
            previous = observed.state if same_object else {}
            state, observations = differ(previous, obj, received_at)
            stored = [event for event in (self.record(o) for o in observations) if event is not None]
            observed.uid, observed.resource_version, observed.state = uid, rv, state
            rows.observed_save(observed, "uid", "resource_version", "state")
        return previous, state, stored

    def apply_ascendjob(self, event_type: str, obj: dict[str, Any], received_at: datetime) -> list[JobEvent]:
        """Adoption and events, from the one observer of AscendJobs: the job row follows the object."""
        meta = obj.get("metadata") or {}
        if event_type == "DELETED":
            namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
            self.forget(namespace, name)
            job_mark_deleted(
                cluster=self.cluster, namespace=namespace, name=name, uid=str(meta.get("uid", ""))
            )
            return []
        job = self.adopt(obj)
        if job is None:
            return []
        previous, state, stored = self.apply_object(
            "ascendjob", obj, ascendjobs.ascendjob_observations, received_at
        )
        limits = ("backoff_limit", "fault_retry_times")
        if any(previous.get(k) != state.get(k) for k in limits) or not previous:
            incident_services.budget_set_limits(
                job=job,
                backoff_limit=state.get("backoff_limit"),
                fault_retry_times=state.get("fault_retry_times") or 0,
            )
        return stored

    def apply_podgroup(self, event_type: str, obj: dict[str, Any], received_at: datetime) -> list[JobEvent]:
        if event_type == "DELETED":
            return []
        previous, _, stored = self.apply_object("podgroup", obj, podgroups.podgroup_observations, received_at)
        if not previous:
            self._observe_creation(obj)
        # Platform-mode questions are not ours: ``manage.py decide`` is their one observer (sharded,
        # answering in parallel lanes within ClusterD's 3 s poll, which a reordering applier cannot).
        return stored

    def _observe_creation(self, obj: dict[str, Any]) -> None:
        """A PodGroup seen for the first time: the keys the operator copied at creation (in_effect)."""
        job = self.resolve_job(podgroups.podgroup_job(obj))
        if job is not None:
            incarnation_observe_podgroup(job, obj, "ingester")

    def apply_configmap(self, event_type: str, obj: dict[str, Any], received_at: datetime) -> list[JobEvent]:
        if event_type == "DELETED":
            return []
        if reset_config.is_reset_configmap(obj):
            return self.apply_object("reset-config", obj, reset_config.reset_observations, received_at)[2]
        if reschedule_reason.is_reschedule_configmap(obj):
            return self.apply_object(
                "reschedule-reason", obj, reschedule_reason.reschedule_observations, received_at
            )[2]
        return []

    def apply_k8s_event(self, event_type: str, obj: dict[str, Any], received_at: datetime) -> list[JobEvent]:
        if event_type == "DELETED":
            return []  # Events expire; their history stays with us
        snapshot = init_snapshot.init_snapshot_of(obj, received_at)
        # Only an accepted Init is a snapshot; a refused one is retried every second and kept nowhere
        # (D6: manager.go:468-492, fault_recover_service.go:579-585), so its config must not stand in
        # for the PodGroup the job was created with.
        if snapshot is not None and snapshot.accepted:
            job = self.resolve_job(snapshot.job)
            if job is not None:
                incarnation_observe_init(job, snapshot.job.uid, snapshot.keys, snapshot.at)
        stored = [self.record(o) for o in k8s_events.event_observations(obj, received_at)]
        return [event for event in stored if event is not None]

    def apply_listing(self, resource: str, listing: Listing) -> None:
        """A (re)list ended: AscendJobs that were not in it left the cluster while nobody watched."""
        if resource != "ascendjobs":
            return
        for namespace, name in list(self._jobs):
            if (namespace, name) not in listing.present and (
                not listing.namespace or namespace == listing.namespace
            ):
                self.forget(namespace, name)
        jobs_mark_gone(cluster=self.cluster, namespace=listing.namespace, present=set(listing.present))

    # --- ClusterD ---------------------------------------------------------------------------------
    def apply_fault_signal(self, signal: FaultSignal, received_at: datetime) -> list[JobEvent]:
        """Diff one job's fault set against the stored one (full-state resends repeat nothing)."""
        if not signal.job_id:
            if signal.signal_type == clusterd_faults.NORMAL:
                ObservedObject.objects.filter(cluster=self.cluster, kind=CLUSTERD_KIND).update(state={})
            return []
        with transaction.atomic():
            observed = self._observed(CLUSTERD_KIND, "", signal.job_id)
            state, observations = clusterd_faults.fault_observations(observed.state, signal, received_at)
            stored = [event for event in (self.record(o) for o in observations) if event is not None]
            observed.state = state
            observed.resource_version = signal.uuid[:64]
            rows.observed_save(observed, "state", "resource_version")
        return stored

    def prune_source_keys(self, older_than_s: float = 3 * 3600) -> int:
        """Forget handled Events older than Kubernetes keeps them (1 h by default, 3 h on OpenShift)."""
        return source_keys_prune(cluster_id=self.cluster.pk, older_than=timedelta(seconds=older_than_s))

    # --- dispatch ---------------------------------------------------------------------------------
    def apply(
        self, resource: str, event_type: str, obj: dict[str, Any], received_at: datetime
    ) -> list[JobEvent]:
        """Route one watch event by resource."""
        handler = {
            "ascendjobs": self.apply_ascendjob,
            "podgroups": self.apply_podgroup,
            "configmaps": self.apply_configmap,
            "events": self.apply_k8s_event,
        }[resource]
        return handler(event_type, obj, received_at)
