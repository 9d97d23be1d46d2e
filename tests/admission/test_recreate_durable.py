"""Recreate is a recorded operation run by a real Celery worker (issue #24 item 3, design §4.6).

The built-in cluster's API server calls mutating webhooks on CREATE only, before it stores anything
(``simcluster/kubeapi/admission.py``, as kube-apiserver's admission chain does), so a webhook of the
test's own (a "gate") can hold, fail or refuse exactly the create of the recreate, after its delete
went through: the moment a worker that dies loses the job, and the failure modes of the create.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s
from rest_framework.test import APIClient

from apps.admission.models import RecreateOperation
from apps.admission.recreate_ops import ANNOTATION_OPERATION, job_lock, recreate_run, recreates_sweep
from apps.audit.actors import Actor
from apps.cluster.client import apply_mutating_webhook
from apps.events.models import JobEvent
from apps.jobs.clusters import cluster_ref
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.adoption import job_adopt
from apps.policies.services import policy_revision_create
from mindcluster import keys as k
from simcluster.kube import Kube
from tests.support import wait_for
from tests.support.sim import make_job

pytestmark = pytest.mark.django_db(transaction=True)
SPEC = {
    "mindcluster_version": "26.1",
    "strategies": ["recover-in-place", "dump"],
    "fault_scheduling": "grace",
}
Decide = Callable[[dict[str, Any], int], str]  # (object, call number) -> "allow" | "fail" | "deny"


class Gate:
    """A mutating webhook for the jobs labelled ``gate=<id>``: each CREATE waits for ``opened``
    (when set), then is answered as ``decide`` says: allowed, HTTP 500 (the API server answers 500:
    transient) or ``allowed: false`` with 403 (refused for good)."""

    def __init__(self, decide: Decide) -> None:
        self.id = uuid.uuid4().hex[:8]
        self.decide = decide
        self.calls = 0
        self.arrived = threading.Event()
        self.answered = threading.Event()
        self.opened = threading.Event()
        self.opened.set()
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                gate.calls += 1
                gate.arrived.set()
                gate.opened.wait(30)
                verdict = gate.decide(review["request"]["object"], gate.calls)
                if verdict == "fail":
                    self.send_response(500)
                    self.end_headers()
                else:
                    answer: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": verdict == "allow"}
                    if verdict == "deny":
                        answer["status"] = {"code": 403, "message": "refused by the gate"}
                    body = json.dumps(
                        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}
                    ).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                gate.answered.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def configuration(self) -> dict[str, Any]:
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": f"gate-{self.id}"},
            "webhooks": [
                {
                    "name": f"gate-{self.id}.test",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 30,
                    "clientConfig": {"url": self.url},
                    "objectSelector": {"matchLabels": {"gate": self.id}},
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [k.ASCENDJOB_GROUP],
                            "apiVersions": [k.ASCENDJOB_VERSION],
                            "resources": [k.ASCENDJOB_PLURAL],
                        }
                    ],
                }
            ],
        }


@pytest.fixture
def gate_factory(cluster_row: Cluster, kube: Kube) -> Iterator[Callable[[Decide], Gate]]:
    gates: list[Gate] = []

    def make(decide: Decide) -> Gate:
        gate = Gate(decide)
        apply_mutating_webhook(cluster_ref(cluster_row), gate.configuration())
        gates.append(gate)
        return gate

    yield make
    api = k8s.AdmissionregistrationV1Api(kube.api_client)
    for gate in gates:
        gate.opened.set()
        api.delete_mutating_webhook_configuration(f"gate-{gate.id}")
        gate.server.shutdown()


def allow_all(obj: dict[str, Any], call: int) -> str:
    return "allow"


@pytest.fixture
def api(cluster_row: Cluster) -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser(f"root-{uuid.uuid4().hex[:6]}", password="pw"))
    return client


def running_job(kube: Kube, cluster: Cluster, namespace: str, gate: Gate) -> tuple[TrainingJob, str]:
    """A job in the cluster, adopted, with a revision 2 that waits for a recreate; its UID."""
    manifest = make_job(f"redo-{gate.id}", namespace=namespace, labels={"gate": gate.id})
    live = kube.custom.create_namespaced_custom_object(
        k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, namespace, k.ASCENDJOB_PLURAL, manifest
    )
    row, _ = job_adopt(cluster=cluster, manifest=live)
    TrainingJob.objects.filter(pk=row.pk).update(uid=live["metadata"]["uid"])
    policy_revision_create(job=row, spec=SPEC, actor=Actor(name="t"), push=False)
    row.refresh_from_db()
    return row, live["metadata"]["uid"]


def post_recreate(api: APIClient, row: TrainingJob) -> dict[str, Any]:
    answer = api.post(f"/api/v1/jobs/{row.pk}/recreate/", {"confirm": row.name, "revision": 2}, format="json")
    assert answer.status_code == 202, answer.content
    return dict(answer.json())


def operation_state(op_id: int) -> str:
    return RecreateOperation.objects.get(pk=op_id).state


def assert_recreated(kube: Kube, row: TrainingJob, op_id: int, old_uid: str) -> dict[str, Any]:
    """Done: a new job with revision 2 in the cluster, the row on its UID, one job.recreated event."""
    operation = RecreateOperation.objects.get(pk=op_id)
    assert operation.state == "done", (operation.state, operation.steps)
    live = kube.get_job(row.namespace, row.name)
    assert live is not None and live["metadata"]["uid"] == operation.new_uid != old_uid
    assert live["metadata"]["annotations"][k.ANNOTATION_POLICY_REVISION] == "2"
    assert live["metadata"]["annotations"][ANNOTATION_OPERATION] == str(op_id)
    row.refresh_from_db()
    assert row.uid == operation.new_uid and row.deleted_at is None
    events = JobEvent.objects.filter(job=row, kind="job.recreated")
    assert [e.data["new_uid"] for e in events] == [operation.new_uid]
    return live


@pytest.mark.slow(seconds=40)
def test_a_recreate_killed_between_delete_and_create_is_finished_by_the_sweep(
    kube: Kube, namespace: str, cluster_row: Cluster, api: APIClient, worker_factory: Any, gate_factory: Any
) -> None:
    gate = gate_factory(lambda obj, call: "fail" if call == 2 else "allow")
    row, old_uid = running_job(kube, cluster_row, namespace, gate)
    gate.arrived.clear()
    gate.answered.clear()
    gate.opened.clear()  # the next CREATE (the recreate's) waits here
    worker = worker_factory(private=True)
    queued = post_recreate(api, row)
    assert queued["state"] == "pending" and queued["new_uid"] == ""
    assert (
        RecreateOperation.objects.get(pk=queued["id"]).manifest["metadata"]["annotations"][
            k.ANNOTATION_POLICY_REVISION
        ]
        == "2"
    )  # recorded before anything was deleted
    assert gate.arrived.wait(30), "the worker never created"
    # The old job is deleted and the worker is inside its create: it dies here.
    worker.kill()
    gate.opened.set()  # the API server's create, now without a client, is answered 500
    assert gate.answered.wait(10)
    assert kube.get_job(row.namespace, row.name) is None  # the job is gone from the cluster
    assert operation_state(queued["id"]) == "creating"
    row.refresh_from_db()
    assert row.uid == "recreating"
    # The beat sweep finds it (here: without waiting for RECREATE_STALL_SECONDS) and finishes it.
    worker_factory()
    assert recreates_sweep(stalled_after=timedelta(0)) == [queued["id"]]
    wait_for(lambda: operation_state(queued["id"]) == "done", 30, "the swept recreate")
    assert_recreated(kube, row, queued["id"], old_uid)
    status = api.get(queued["status_url"]).json()
    assert status["finished"] and [s["state"] for s in status["steps"]][-1] == "done"


def test_two_recreates_of_one_job_are_serialized_and_a_rerun_is_idempotent(
    kube: Kube, namespace: str, cluster_row: Cluster, api: APIClient, broker: Any, gate_factory: Any
) -> None:
    row, old_uid = running_job(kube, cluster_row, namespace, gate_factory(allow_all))
    first = post_recreate(api, row)  # queued; no worker consumes in this test
    second = api.post(f"/api/v1/jobs/{row.pk}/recreate/", {"confirm": row.name}, format="json")
    assert second.status_code == 409
    error = second.json()["errors"][0]
    assert error["code"] == "recreate_in_progress" and f"Recreate {first['id']} " in error["message"]
    # Two runs of the task at once: the one that does not get the job's lock leaves it alone.
    with job_lock(row.pk) as held:
        assert held
        outcome: list[str] = []
        other = threading.Thread(target=lambda: outcome.append(recreate_run(first["id"])))
        other.start()
        other.join(10)
        assert outcome == ["busy"] and operation_state(first["id"]) == "pending"
    assert recreate_run(first["id"]) == "done"
    live = assert_recreated(kube, row, first["id"], old_uid)
    # Re-running a finished operation (a redelivered message, a duplicate from the sweep) does nothing.
    assert recreate_run(first["id"]) == "done"
    assert kube.get_job(row.namespace, row.name)["metadata"]["uid"] == live["metadata"]["uid"]
    assert_recreated(kube, row, first["id"], old_uid)
    # Now that it has finished, the job may be recreated again.
    third = api.post(f"/api/v1/jobs/{row.pk}/recreate/", {"confirm": row.name}, format="json")
    assert third.status_code == 202, third.content


def test_a_rerun_after_a_create_that_was_not_recorded_adopts_its_own_job(
    kube: Kube, namespace: str, cluster_row: Cluster, api: APIClient, broker: Any, gate_factory: Any
) -> None:
    """A worker that died after the cluster created the job but before it recorded that."""
    row, old_uid = running_job(kube, cluster_row, namespace, gate_factory(allow_all))
    queued = post_recreate(api, row)
    operation = RecreateOperation.objects.get(pk=queued["id"])
    kube.custom.delete_namespaced_custom_object(
        k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, row.namespace, k.ASCENDJOB_PLURAL, row.name
    )
    wait_for(lambda: kube.get_job(row.namespace, row.name) is None, 30, "the old job gone")
    kube.custom.create_namespaced_custom_object(
        k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, row.namespace, k.ASCENDJOB_PLURAL, operation.manifest
    )
    RecreateOperation.objects.filter(pk=operation.pk).update(state="creating")
    assert recreate_run(operation.pk) == "done"
    assert_recreated(kube, row, operation.pk, old_uid)


@pytest.mark.slow(seconds=10)
def test_a_create_failing_three_times_is_retried_and_the_job_is_not_lost(
    kube: Kube, namespace: str, cluster_row: Cluster, api: APIClient, worker_factory: Any, gate_factory: Any
) -> None:
    gate = gate_factory(lambda obj, call: "allow" if call == 1 or call > 4 else "fail")
    row, old_uid = running_job(kube, cluster_row, namespace, gate)
    worker_factory()
    queued = post_recreate(api, row)
    wait_for(lambda: operation_state(queued["id"]) == "done", 40, "the recreate after three failed creates")
    assert gate.calls == 5  # the job's own create, three refused, the one that went through
    assert_recreated(kube, row, queued["id"], old_uid)
    operation = RecreateOperation.objects.get(pk=queued["id"])
    assert operation.attempts == 3
    assert [s["step"] for s in operation.steps].count("create failed") == 3


def test_a_manifest_the_cluster_refuses_is_rolled_back_to_the_job_as_it_was(
    kube: Kube, namespace: str, cluster_row: Cluster, api: APIClient, worker_factory: Any, gate_factory: Any
) -> None:
    def refuse_revision_2(obj: dict[str, Any], call: int) -> str:
        revision = obj["metadata"].get("annotations", {}).get(k.ANNOTATION_POLICY_REVISION)
        return "deny" if revision == "2" else "allow"

    row, old_uid = running_job(kube, cluster_row, namespace, gate_factory(refuse_revision_2))
    worker_factory()
    queued = post_recreate(api, row)
    wait_for(lambda: operation_state(queued["id"]) == "rolled_back", 30, "the roll back")
    operation = RecreateOperation.objects.get(pk=queued["id"])
    live = kube.get_job(row.namespace, row.name)
    assert live is not None and live["metadata"]["uid"] == operation.new_uid != old_uid
    assert live["metadata"]["annotations"].get(k.ANNOTATION_POLICY_REVISION) != "2"
    assert "refused by the gate" in operation.last_error
    row.refresh_from_db()
    assert row.uid == operation.new_uid and row.deleted_at is None
    assert not JobEvent.objects.filter(job=row, kind="job.recreated").exists()
