"""Issue 15 end to end: the built-in cluster calls our webhook, the operator and ClusterD see the policy.

Real parts only: the simulated MindCluster (API emulator + operator + ClusterD) over HTTP, the
control plane's webhook served as in production (``apps.admission.serving``: HTTPS that requires the
API server's client certificate, which the built-in cluster presents; ``conftest.py``), the
official Python client and ``kubectl apply`` (validated against the emulator's OpenAPI, generated
from the real AscendJob CRD).

"ClusterD's Init snapshot has the strategies" is read here from the PodGroup: ClusterD snapshots
``recover-strategy`` and requires ``process-recover-enable=on`` from the PodGroup at the job's first
``Init`` (``component/clusterd/pkg/domain/common/utils.go:100-140``,
``component/clusterd/pkg/application/recover/fault_recover_service.go:550-555``), and the operator
sets that label only when it creates the PodGroup from a job that already has ``recover-strategy``
(``component/ascend-operator/pkg/controllers/v1/job.go:428-491``).
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

from apps.accounts.models import NamespaceGrant, Role
from apps.accounts.services import token_issue
from apps.admission.merge import ANNOTATION_PRESET
from apps.admission.models import PendingAdmission
from apps.admission.pending import ANNOTATION_ADMISSION_UID
from apps.audit.actors import Actor
from apps.events.models import Incident, JobEvent
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.adoption import job_adopt
from apps.policies.models import PolicyRevision
from apps.policies.services import policy_revision_create
from mindcluster import keys as k
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.admission import DEFAULT_SPEC, bare_job, create

KUBECTL = next(
    (
        p
        for p in ("/usr/lib/google-cloud-sdk/bin/kubectl.1.33", shutil.which("kubectl") or "")
        if p and Path(p).exists()
    ),
    None,
)
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(admission_world: dict[str, Any]) -> dict[str, Any]:
    """This module's world: the managed namespace with our webhook (``conftest.admission_world``)."""
    return admission_world


@pytest.fixture(scope="module")
def sim() -> Iterator[SimCluster]:
    # A cluster of this module's own, not the shared one: the tests register admission webhooks on the API
    # server (cluster-wide objects that outlive the test, one of them pointing at a listener that hangs),
    # which would make every later create on a shared cluster wait for them.
    with SimCluster(clock_speed=500, seed=15, control_port=0) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kube(sim: SimCluster) -> Iterator[Kube]:
    client = Kube(sim.kubeconfig_path)
    yield client
    client.close()


def podgroup(kube: Kube, job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return wait_for(
        lambda: kube.get_podgroup(meta["namespace"], f"{meta['name']}-{meta['uid']}"), what="PodGroup"
    )


def assert_admitted(kube: Kube, job: dict[str, Any], strategies: str) -> TrainingJob:
    """The job carries the admitted policy, and once the watcher has seen it (``job_adopt``, what the
    ingester calls) its row has revision 1 from admission."""
    annotations = job["metadata"]["annotations"]
    assert annotations[k.ANNOTATION_RECOVER_STRATEGY] == strategies
    assert annotations[k.ANNOTATION_POLICY_REVISION] == "1"
    assert annotations[ANNOTATION_ADMISSION_UID]  # the review's uid, confirmed by the watcher
    pg = podgroup(kube, job)
    assert pg["metadata"]["labels"][k.LABEL_PROCESS_RECOVER_ENABLE] == "on"
    assert pg["metadata"]["annotations"][k.ANNOTATION_RECOVER_STRATEGY] == strategies
    meta = job["metadata"]
    assert not TrainingJob.objects.filter(namespace=meta["namespace"], name=meta["name"]).exists()
    cluster = Cluster.objects.get(name="sim")
    row, _ = job_adopt(cluster=cluster, manifest=kube.get_job(meta["namespace"], meta["name"]))
    assert PendingAdmission.objects.get(uid=annotations[ANNOTATION_ADMISSION_UID]).state == "confirmed"
    assert row.current_revision is not None
    assert (row.current_revision.number, row.current_revision.source) == (1, PolicyRevision.Source.ADMISSION)
    return row


def clusterd_init(sim: SimCluster, job: dict[str, Any]) -> int:
    """ClusterD's ``Init`` over gRPC (waits out 402 JobNotExist): 0 accepted, 403 ProcessRescheduleOff."""
    import grpc

    from mindcluster.wire.grpc_gen import recover_pb2, recover_pb2_grpc

    channel = grpc.insecure_channel(sim.grpc_address)
    try:
        stub = recover_pb2_grpc.RecoverStub(channel)
        request = recover_pb2.ClientInfo(jobId=job["metadata"]["uid"], role="agent")
        return int(
            wait_for(lambda: (lambda s: s if s.code != 402 else None)(stub.Init(request, timeout=5))).code
        )
    finally:
        channel.close()


def admin_client(cluster: Cluster, namespace: str) -> APIClient:
    from django.contrib.auth.models import User

    user = User.objects.create_user(f"u{uuid.uuid4().hex[:6]}")
    NamespaceGrant.objects.create(role=Role.ADMIN, user=user, cluster=cluster, namespace=namespace)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_issue(user, 'ci')[1]}")
    return api


def test_python_client_create_gets_the_namespace_default(world, kube, sim) -> None:
    job = create(kube, bare_job("plain", world["namespace"]))
    row = assert_admitted(kube, job, "retry,recover,dump")
    assert clusterd_init(sim, job) == 0  # process-level recovery accepted at the job's first Init
    # What the simulated ClusterD snapshotted at that Init (GetRecoverBaseInfo, utils.go:100-140):
    # the admitted strategies, job-level rescheduling from fault-scheduling, exit always.
    snapshot = sim.clusterd.init_snapshot(job["metadata"]["uid"])
    assert snapshot is not None and snapshot.process_recovery_on
    assert snapshot.configured == ("retry", "recover", "dump", "exit", "job-rescheduling")
    assert job["metadata"]["labels"][k.LABEL_FAULT_SCHEDULING] == "grace"
    row.refresh_from_db()
    # The watcher's adoption of the created job keeps the admission revision and learns the UID.
    job_adopt(cluster=world["cluster"], manifest=kube.get_job(world["namespace"], "plain"))
    row.refresh_from_db()
    assert row.uid == job["metadata"]["uid"] and row.revisions.count() == 1
    body = admin_client(world["cluster"], world["namespace"]).get(f"/api/v1/jobs/{row.pk}/policy/").json()
    assert (body["revision"], body["source"]) == (1, "admission")
    assert JobEvent.objects.filter(job=row, kind="policy.admitted").exists()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_apply_gets_the_namespace_default(world, kube, sim, tmp_path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(bare_job("from-kubectl", world["namespace"])))
    out = subprocess.run(
        [KUBECTL, "--kubeconfig", sim.kubeconfig_path, "apply", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert_admitted(kube, kube.get_job(world["namespace"], "from-kubectl"), "retry,recover,dump")


def test_preset_annotation_and_the_users_own_key_wins(world, kube) -> None:
    job = create(kube, bare_job("preset", world["namespace"], annotations={ANNOTATION_PRESET: "dying-gasp"}))
    assert_admitted(kube, job, "dump")
    own = bare_job("own", world["namespace"], annotations={k.ANNOTATION_RECOVER_STRATEGY: "retry"})
    job = create(kube, own)
    row = assert_admitted(kube, job, "retry")
    event = JobEvent.objects.get(job=row, kind="policy.admitted")
    assert any("recover-strategy" in w and "kept" in w for w in event.data["warnings"])
    assert "recover-strategy" in row.current_revision.comment
    assert row.current_revision.spec["strategies"] == ["retry"]


def _blackhole() -> tuple[socket.socket, int]:
    """A listener that accepts connections and never answers (a hung webhook)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    threading.Thread(target=lambda: [sock.accept() for _ in range(64)], daemon=True).start()
    return sock, sock.getsockname()[1]


def test_webhook_down_or_hung_the_job_is_still_created_within_the_timeout(world, kube, sim) -> None:
    sock, port = _blackhole()
    try:
        call_command("register_webhook", "--cluster", "sim", "--url", f"http://127.0.0.1:{port}")
        started = time.monotonic()
        job = create(kube, bare_job("hung", world["namespace"]))
        took = time.monotonic() - started
    finally:
        sock.close()
    assert 1.9 < took < 3.0  # timeoutSeconds: 2, then failurePolicy: Ignore
    assert k.ANNOTATION_RECOVER_STRATEGY not in (job["metadata"].get("annotations") or {})
    podgroup(kube, job)
    assert clusterd_init(sim, job) == 403  # ProcessRescheduleOff: no process-level recovery, for life
    call_command("register_webhook", "--cluster", "sim", "--url", "http://127.0.0.1:1")  # stopped: refused
    started = time.monotonic()
    create(kube, bare_job("down", world["namespace"]))
    assert time.monotonic() - started < 1.0
    row, _ = job_adopt(cluster=world["cluster"], manifest=kube.get_job(world["namespace"], "hung"))
    assert row.current_revision.source == PolicyRevision.Source.OBSERVED
    assert row.current_revision.spec["strategies"] == []  # the control plane shows it without its policy


def test_recreate_applies_a_new_revision_keeps_one_history_and_waits_for_recoveries(
    world, kube, worker_factory
) -> None:
    worker_factory()  # the recreate runs in a Celery task (202, then its status)
    job = create(kube, bare_job("redo", world["namespace"]))
    row = assert_admitted(kube, job, "retry,recover,dump")
    job_adopt(cluster=world["cluster"], manifest=kube.get_job(world["namespace"], "redo"))
    r2 = policy_revision_create(
        job=row,
        spec={**DEFAULT_SPEC, "strategies": ["recover-in-place", "dump"]},
        actor=Actor(name="t"),
        push=False,
    )
    api = admin_client(world["cluster"], world["namespace"])
    url = f"/api/v1/jobs/{row.pk}/recreate/"
    assert api.post(url, {"confirm": "wrong", "revision": 2}, format="json").status_code == 400
    answer = api.post(url, {"confirm": "redo", "revision": r2.number}, format="json")
    assert answer.status_code == 202, answer.content
    assert answer["Location"] == answer.json()["status_url"]
    status_url = answer.json()["status_url"]
    wait_for(lambda: api.get(status_url).json()["finished"], 30, "the recreate task")
    body = api.get(status_url).json()
    assert body["state"] == "done", body
    assert [step["state"] for step in body["steps"]] == ["pending", "deleting", "creating", "done"]
    assert body["old_uid"] == job["metadata"]["uid"] != body["new_uid"]
    new = kube.get_job(world["namespace"], "redo")
    assert new["metadata"]["uid"] == body["new_uid"]
    assert new["metadata"]["annotations"][k.ANNOTATION_POLICY_REVISION] == "2"
    pg = podgroup(kube, new)
    assert pg["metadata"]["annotations"][k.ANNOTATION_RECOVER_STRATEGY] == "recover-in-place,dump"
    assert pg["metadata"]["labels"][k.LABEL_PROCESS_RECOVER_ENABLE] == "on"
    # One history: the same row, its revisions and a job.recreated event with both UIDs.
    assert TrainingJob.objects.filter(namespace=world["namespace"], name="redo").count() == 1
    row.refresh_from_db()
    assert row.uid == body["new_uid"] and row.deleted_at is None and row.revisions.count() == 2
    event = JobEvent.objects.get(job=row, kind="job.recreated")
    assert event.data["old_uid"] == body["old_uid"] and event.data["new_uid"] == body["new_uid"]
    # The old incarnation's DELETED, as the watcher reports it, does not end the history.
    from apps.policies.adoption import job_mark_deleted

    job_mark_deleted(cluster=world["cluster"], namespace=world["namespace"], name="redo", uid=body["old_uid"])
    row.refresh_from_db()
    assert row.deleted_at is None
    # During a recovery: refused with 409, nothing touched.
    Incident.objects.create(job=row, number=1, opened_at=row.created_at, first_seq=1, last_seq=1)
    refused = api.post(url, {"confirm": "redo"}, format="json")
    assert refused.status_code == 409 and refused.json()["errors"][0]["code"] == "recovery_in_progress"
    assert kube.get_job(world["namespace"], "redo")["metadata"]["uid"] == body["new_uid"]


def creation_review(uid: str, job: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionReview the API server sends our webhook when ``job`` is created."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": k.ASCENDJOB_GROUP, "version": "v1", "kind": "AscendJob"},
            "resource": {"group": k.ASCENDJOB_GROUP, "version": "v1", "resource": "ascendjobs"},
            "namespace": job["metadata"]["namespace"],
            "operation": "CREATE",
            "object": job,
        },
    }


def test_admission_review_is_idempotent_and_never_denies(world, client) -> None:
    review = creation_review("u-1", bare_job("twice", world["namespace"]))

    def post(body: dict[str, Any]) -> Any:
        return client.post("/admission/ascendjobs/", json.dumps(body), content_type="application/json")

    first, second = post(review).json()["response"], post(review).json()["response"]
    assert first["allowed"] and first["patch"] == second["patch"]
    assert PendingAdmission.objects.get(uid="u-1").name == "twice"
    assert not TrainingJob.objects.filter(name="twice").exists()  # nothing seen, nothing recorded
    broken = json.loads(json.dumps(review))
    broken["request"]["uid"] = "u-2"
    broken["request"]["object"]["metadata"].update(name="broken", annotations={ANNOTATION_PRESET: "no-such"})
    broken["request"]["object"]["metadata"]["labels"][k.LABEL_POD_RESCHEDULING] = "on"
    broken["request"]["object"]["metadata"]["labels"][k.LABEL_FAULT_RETRY_TIMES] = "not-a-number"
    answer = post(broken).json()["response"]
    assert answer["allowed"] is True
    # No policy: the only change is the stamp, so the watcher can attach the skip to the job it sees.
    stamp = {
        "op": "add",
        "path": "/metadata/annotations/recovery.mindcluster.io~1admission-uid",
        "value": "u-2",
    }
    assert json.loads(base64.b64decode(answer["patch"])) == [stamp]
    assert any("no-such" in w for w in answer["warnings"]) and any(
        "not applied" in w for w in answer["warnings"]
    )
    assert PendingAdmission.objects.get(uid="u-2").outcome == "skipped"
    # Seen created with the stamp (the answer's only patch), the job gets the skip event.
    seen = json.loads(json.dumps(broken["request"]["object"]))
    seen["metadata"].update(uid="k8s-uid-2", annotations={ANNOTATION_ADMISSION_UID: "u-2"})
    skipped, _ = job_adopt(cluster=world["cluster"], manifest=seen)
    assert JobEvent.objects.filter(job=skipped, kind="policy.admission_skipped").exists()
    assert client.post("/admission/ascendjobs/", "[]", content_type="application/json").status_code == 400


def test_async_recording_answers_first_and_records_right_after(world, client, settings) -> None:
    settings.ADMISSION_RECORD_ASYNC = True
    review = creation_review("u-async", bare_job("later", world["namespace"]))
    answer = client.post("/admission/ascendjobs/", json.dumps(review), content_type="application/json").json()
    assert "patch" in answer["response"]
    assert wait_for(lambda: PendingAdmission.objects.filter(uid="u-async").exists(), what="pending admission")
