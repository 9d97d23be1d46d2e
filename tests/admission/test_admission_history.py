"""Issue #24 item 2: admission records nothing it has not seen happen.

The webhook answers with a patch stamped with the review's uid and writes a pending admission; the
job's history (its row, revision 1 from admission) starts only when the watcher sees the object
created with that stamp. The built-in cluster calls the webhook where kube-apiserver does: before
validation and the AlreadyExists check (``simcluster/kubeapi/admission.py`` cites create.go and
store.go), so a create the API server then refuses leaves only a pending row that expires.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from kubernetes.client.rest import ApiException

from apps.admission import views
from apps.admission.models import PendingAdmission
from apps.admission.pending import ANNOTATION_ADMISSION_UID, pending_expire
from apps.audit.actors import Actor
from apps.events.models import Incident, JobEvent
from apps.jobs.models import TrainingJob
from apps.policies.adoption import job_adopt
from apps.policies.models import PolicyRevision
from apps.policies.services import policy_revision_create
from mindcluster import keys as k
from simcluster.kube import Kube
from tests.support import wait_for
from tests.support.admission import DEFAULT_SPEC, bare_job, create, register
from tests.support.ingest_procs import IngestProcess

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(admission_world: dict[str, Any]) -> dict[str, Any]:
    """This module's world: the managed namespace with our webhook (``conftest.admission_world``)."""
    return admission_world


def _later() -> Any:
    return timezone.now() + timedelta(seconds=settings.ADMISSION_PENDING_TTL_SECONDS + 1)


def _history(job: TrainingJob) -> tuple[Any, ...]:
    job.refresh_from_db()
    revisions = tuple(job.revisions.order_by("number").values_list("number", "source"))
    return (job.pk, job.uid, job.deleted_at, job.current_revision_id, revisions, job.incidents.count())


def test_a_second_create_of_a_running_job_leaves_its_history_intact(
    world: dict[str, Any], kube: Kube
) -> None:
    ns, cluster = world["namespace"], world["cluster"]
    first = create(kube, bare_job("train-7", ns))
    row, _ = job_adopt(cluster=cluster, manifest=kube.get_job(ns, "train-7"))
    policy_revision_create(
        job=row, spec={**DEFAULT_SPEC, "strategies": ["dump"]}, actor=Actor(name="owner"), push=False
    )
    Incident.objects.create(job=row, number=1, opened_at=row.created_at, first_seq=1, last_seq=1)
    before = _history(row)
    assert before[1] == first["metadata"]["uid"] and len(before[4]) == 2

    with pytest.raises(ApiException) as err:  # `kubectl create -f job.yaml` again
        create(kube, bare_job("train-7", ns))
    assert err.value.status == 409
    # The webhook was asked (it runs before the AlreadyExists check) and only wrote a pending row.
    assert PendingAdmission.objects.filter(namespace=ns, name="train-7").count() == 2
    assert _history(row) == before
    # The watcher's next look at the live job (a relist) changes nothing either.
    job_adopt(cluster=cluster, manifest=kube.get_job(ns, "train-7"))
    assert _history(row) == before
    assert TrainingJob.objects.filter(namespace=ns, name="train-7").count() == 1
    assert pending_expire(_later()) == 1
    [expired] = PendingAdmission.objects.filter(name="train-7", state=PendingAdmission.State.EXPIRED)
    assert expired.job is None


def test_a_dry_run_create_records_nothing(world: dict[str, Any], kube: Kube) -> None:
    ns = world["namespace"]
    answer = create(kube, bare_job("dry", ns), dry_run="All")
    annotations = answer["metadata"]["annotations"]
    assert annotations[k.ANNOTATION_RECOVER_STRATEGY] == "retry,recover,dump"  # the same answer...
    assert ANNOTATION_ADMISSION_UID not in annotations  # ...nothing pending
    assert not PendingAdmission.objects.exists()
    assert not TrainingJob.objects.filter(namespace=ns).exists()
    assert not JobEvent.objects.exists()
    assert kube.get_job(ns, "dry") is None


def test_an_answer_after_the_api_servers_timeout_is_not_recorded(
    world: dict[str, Any], kube: Kube, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns, cluster = world["namespace"], world["cluster"]
    register(world["url"], world["tls"], "--timeout", "1")
    real_admit = views.admit

    def slow_admit(*args: Any, **kwargs: Any) -> Any:
        time.sleep(1.5)  # the API server gives up after timeoutSeconds: 1 (failurePolicy Ignore)
        return real_admit(*args, **kwargs)

    monkeypatch.setattr(views, "admit", slow_admit)
    job = create(kube, bare_job("late", ns))
    assert ANNOTATION_ADMISSION_UID not in (job["metadata"].get("annotations") or {})
    pending = wait_for(lambda: PendingAdmission.objects.filter(name="late").first(), what="the late answer")
    row, _ = job_adopt(cluster=cluster, manifest=kube.get_job(ns, "late"))
    assert row.current_revision is not None
    assert row.current_revision.source == PolicyRevision.Source.OBSERVED  # what the job really has
    assert not row.revisions.filter(source=PolicyRevision.Source.ADMISSION).exists()
    pending.refresh_from_db()
    assert pending.state == PendingAdmission.State.PENDING and pending.job is None
    assert pending_expire(_later()) == 1
    pending.refresh_from_db()
    assert pending.state == PendingAdmission.State.EXPIRED


@pytest.mark.slow(seconds=30)
def test_a_pending_admission_is_confirmed_by_the_ingester_when_the_job_appears(
    world: dict[str, Any], kube: Kube
) -> None:
    ns = world["namespace"]
    ingester = IngestProcess("sim")
    ingester.start()
    try:
        job = create(kube, bare_job("seen", ns))
        uid = job["metadata"]["annotations"][ANNOTATION_ADMISSION_UID]
        assert PendingAdmission.objects.get(uid=uid).state == PendingAdmission.State.PENDING

        def confirmed() -> PendingAdmission | None:
            return PendingAdmission.objects.filter(uid=uid, state=PendingAdmission.State.CONFIRMED).first()

        pending = wait_for(confirmed, 30, "the ingester confirms the admission")
    finally:
        ingester.stop()
    row = TrainingJob.objects.get(pk=pending.job_id)
    assert (row.namespace, row.name, row.uid) == (ns, "seen", job["metadata"]["uid"])
    assert row.current_revision is not None
    assert (row.current_revision.number, row.current_revision.source) == (1, PolicyRevision.Source.ADMISSION)
    assert JobEvent.objects.filter(job=row, kind="policy.admitted").exists()
