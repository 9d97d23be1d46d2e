"""In effect, not written (design.md §4.4): the `when` of every key, and `in_effect` from what a job
was created with — created-with, observed, unknown, adopted without recover-strategy, pending recreate.

The cluster side is given as the objects the ingester and the push observe (PodGroups and AscendJobs
as first seen); the end-to-end tests in tests/policies/push/test_in_effect_e2e.py drive the built-in cluster.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from apps.audit.actors import Actor
from apps.ingest.init_snapshot import init_snapshot_of, snapshot_keys
from apps.jobs.incarnations import incarnation_observe_init, incarnation_observe_podgroup
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.adoption import job_adopt
from apps.policies.desired import desired_state
from apps.policies.in_effect import in_effect
from apps.policies.models import PolicyRevision, PolicySync
from apps.policies.observed import in_effect_briefs
from apps.policies.preview import skeleton_manifest
from apps.policies.rendering import render
from apps.policies.rendering.when import key_when
from apps.policies.services import policy_revision_create
from apps.policies.validation import validate_policy
from mindcluster import keys as c
from tests.support.world import operator_podgroup, training_job

pytestmark = pytest.mark.django_db
ADMIN = Actor(name="test")


# --- when each key takes effect (facts §1) ---------------------------------------------------------
@pytest.mark.parametrize(
    ("section", "key", "when", "source"),
    [
        # ClusterD Init snapshot: component/clusterd/pkg/domain/common/utils.go:100-140
        ("annotations", "recover-strategy", "recreate", "utils.go:107-113"),
        ("labels", "fault-scheduling", "recreate", "utils.go:114-117"),
        ("labels", "pod-rescheduling", "recreate", "utils.go:118-120"),
        ("labels", "subHealthyStrategy", "recreate", "utils.go:130-138"),
        ("labels", "process-recover-enable", "recreate", "utils.go:124-129; job.go:479-491"),
        ("annotations", "ProcessRecoverStrategy", "recreate", "utils.go:106 (presence)"),
        # ascend-operator job-create handler: ascendjob_controller.go:361-401
        ("labels", "fault-retry-times", "recreate", "ascendjob_controller.go:389-401"),
        ("spec", "runPolicy.backoffLimit", "recreate", "ascendjob_controller.go:375-380"),
        # read at every fault
        ("annotations", "wait-reschedule-timeout", "live", "controller.go:1668-1675"),
        ("annotations", "ProcessResultFault", "live", "fault_recover_platform_plugin.go"),
        ("annotations", "RankTableReady", "live", "fault_recover_platform_plugin.go:141-175"),
    ],
)
def test_when_of_every_key(section: str, key: str, when: str, source: str) -> None:
    assert key_when(section, key) == when, source


def test_platform_strategy_value_is_live_but_its_presence_is_creation_time() -> None:
    assert key_when("annotations", "ProcessRecoverStrategy", presence_changes=False) == "live"
    assert key_when("annotations", "ProcessRecoverStrategy", presence_changes=True) == "recreate"


def _spec(**fields: Any) -> Any:
    result = validate_policy({"mindcluster_version": "26.1", **fields})
    assert result.spec is not None, result.errors
    return result.spec


def test_render_effects_use_the_new_vocabulary_with_keys() -> None:
    job = TrainingJob(name="llama", namespace="ns", replicas={"Master": 1, "Worker": 1}, npus_per_pod=8)
    rendered = render(
        skeleton_manifest(job),
        _spec(strategies=["retry", "recover"], pod_rescheduling=True, backoff_limit=3, fault_retry_times=2),
    )
    by = {(e.target, e.when): e for e in rendered.effects}
    assert set(by) == {
        ("podgroup", "recreate"),
        ("ascendjob", "recreate"),
        ("podgroup", "live"),
        ("pod-template", "pod-restart"),
        ("configmap", "training-start"),
        ("image", "image-build"),
        ("launcher", "training-start"),
        ("training-script", "training-start"),
    }
    assert {"recover-strategy", "pod-rescheduling", "fault-scheduling"} <= set(
        by["podgroup", "recreate"].keys
    )
    assert set(by["ascendjob", "recreate"].keys) == {"fault-retry-times", "runPolicy.backoffLimit"}
    assert by["podgroup", "live"].keys == ("wait-reschedule-timeout",)
    assert "TTP_PORT" in by["pod-template", "pod-restart"].keys
    assert all(e.when != "live" or e.target == "podgroup" for e in rendered.effects)


def test_desired_state_stamps_the_revision_and_knows_each_keys_when() -> None:
    job = TrainingJob(name="llama", namespace="ns", replicas={"Master": 1}, npus_per_pod=8)
    state = desired_state(skeleton_manifest(job), _spec(strategies=["recover"]), revision=7)
    assert state.manifest["metadata"]["annotations"][c.ANNOTATION_POLICY_REVISION] == "7"
    whens = {(k.section, k.key): k.when for k in state.keys}
    assert whens["annotations", "recover-strategy"] == "recreate"
    assert whens["annotations", "wait-reschedule-timeout"] == "live"
    assert whens["spec", "runPolicy.backoffLimit"] == "recreate"
    assert state.creation_config["process-recover-enable"] == "on"  # the operator adds it from 7.2


# --- in_effect ---------------------------------------------------------------------------------------
@pytest.fixture
def job() -> TrainingJob:
    return training_job(
        Cluster.objects.create(name=f"sim-{uuid.uuid4().hex[:6]}"), "llama", uid=str(uuid.uuid4())
    )


def applied(job: TrainingJob, number: int) -> None:
    PolicySync.objects.filter(job=job, generation=number).update(state=PolicySync.State.APPLIED)


def test_unknown_before_the_podgroup_is_seen(job: TrainingJob) -> None:
    policy_revision_create(job=job, spec={"strategies": ["retry"]}, actor=ADMIN)
    view = in_effect(job)
    assert view["revision"] is None and view["basis"] == "unknown"
    assert view["pending"] and view["pending"][0]["revision"] == 1
    assert "not observed yet" in view["notes"][0]


def test_created_with_our_revision_annotation(job: TrainingJob) -> None:
    policy_revision_create(job=job, spec={"strategies": ["retry", "dump"]}, actor=ADMIN)
    pg = operator_podgroup(
        job,
        {"fault-scheduling": "grace"},
        {"recover-strategy": "retry,dump", c.ANNOTATION_POLICY_REVISION: "1"},
    )
    assert incarnation_observe_podgroup(job, pg, "ingester")
    view = in_effect(job)
    assert (view["revision"], view["basis"]) == (1, "created-with")
    assert view["since"] is not None and view["pending"] == []
    assert view["process_recovery"] == {"on": True, "reason": ""}
    assert view["observed_from"] == "podgroup-at-creation"


def test_admission_basis(job: TrainingJob) -> None:
    policy_revision_create(
        job=job, spec={"strategies": ["recover"]}, actor=ADMIN, source=PolicyRevision.Source.ADMISSION
    )
    pg = operator_podgroup(
        job, {"fault-scheduling": "grace"}, {"recover-strategy": "recover", c.ANNOTATION_POLICY_REVISION: "1"}
    )
    incarnation_observe_podgroup(job, pg, "ingester")
    assert in_effect(job)["basis"] == "admission"


def test_newer_revision_on_a_running_job_waits_for_recreate(job: TrainingJob) -> None:
    policy_revision_create(job=job, spec={"strategies": ["retry", "dump"]}, actor=ADMIN)
    incarnation_observe_podgroup(
        job,
        operator_podgroup(
            job,
            {"fault-scheduling": "grace"},
            {"recover-strategy": "retry,dump", c.ANNOTATION_POLICY_REVISION: "1"},
        ),
        "ingester",
    )
    policy_revision_create(
        job=job,
        spec={"strategies": ["retry", "recover", "dump"], "wait_reschedule_timeout": 120},
        actor=ADMIN,
    )
    applied(job, 2)
    # The push writes the new keys to the PodGroup afterwards: a later sight does not change history.
    later = operator_podgroup(job, {"fault-scheduling": "grace"}, {"recover-strategy": "retry,recover,dump"})
    later["metadata"]["uid"] = str(job.incarnations.get().podgroup_uid)
    assert not incarnation_observe_podgroup(job, later, "push")
    view = in_effect(job)
    assert (view["revision"], view["basis"]) == (1, "created-with")
    waits = {(p["revision"], p["waits_for"]): p for p in view["pending"]}
    assert waits[2, "recreate"]["keys"] == ["recover-strategy"]
    assert waits[2, "recreate"]["written"] is True
    assert waits[2, "nothing"]["keys"] == ["wait-reschedule-timeout"]  # live: in effect once written
    assert waits[2, "training-start"]["keys"]  # the launcher/flags change too
    brief = in_effect_briefs([TrainingJob.objects.select_related("current_revision").get(pk=job.pk)])[job.pk]
    assert brief["state"] == "waiting" and brief["keys"] == ["recover-strategy"]


def test_platform_mode_switch_waits_for_recreate(job: TrainingJob) -> None:
    policy_revision_create(job=job, spec={"strategies": ["retry", "recover", "dump"]}, actor=ADMIN)
    incarnation_observe_podgroup(
        job,
        operator_podgroup(job, {"fault-scheduling": "grace"}, {"recover-strategy": "retry,recover,dump"}),
        "ingester",
    )
    policy_revision_create(
        job=job, spec={"strategies": ["retry", "recover", "dump"], "platform_mode": True}, actor=ADMIN
    )
    view = in_effect(job)
    assert view["basis"] == "observed" and view["revision"] == 1
    recreate = [p for p in view["pending"] if p["waits_for"] == "recreate"]
    assert recreate and recreate[0]["keys"] == ["ProcessRecoverStrategy (presence: platform mode)"]


def adopted_manifest(name: str, namespace: str, uid: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": c.ASCENDJOB_API_VERSION,
        "kind": c.ASCENDJOB_KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "creationTimestamp": "2026-08-21T09:00:00Z",
            "labels": {"framework": "pytorch", "fault-scheduling": "grace"},
            "annotations": annotations,
        },
        "spec": {
            "replicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "ascend"}]}}},
            }
        },
    }


def test_adopted_without_recover_strategy_says_process_recovery_is_off_even_after_a_push() -> None:
    cluster = Cluster.objects.create(name=f"sim-{uuid.uuid4().hex[:6]}")
    uid = str(uuid.uuid4())
    job, created = job_adopt(cluster=cluster, manifest=adopted_manifest("old", "team-b", uid, {}))
    assert created and job.current_revision.source == PolicyRevision.Source.OBSERVED
    # The operator created its PodGroup from a job without recover-strategy: no process-recover-enable.
    incarnation_observe_podgroup(job, operator_podgroup(job, {"fault-scheduling": "grace"}, {}), "ingester")
    view = in_effect(job)
    assert (view["revision"], view["basis"]) == (1, "observed")
    assert view["process_recovery"]["on"] is False
    # The user now sets strategies and the push writes them: still off, and said plainly.
    policy_revision_create(job=job, spec={"strategies": ["recover", "dump"]}, actor=ADMIN)
    applied(job, 2)
    view = in_effect(TrainingJob.objects.get(pk=job.pk))
    assert view["revision"] == 1 and view["process_recovery"]["on"] is False
    assert "process-level recovery is off until the job is recreated" in view["process_recovery"]["reason"]
    assert any("none of them can run until the job is recreated" in n for n in view["notes"])
    recreate = next(p for p in view["pending"] if p["waits_for"] == "recreate")
    assert recreate["revision"] == 2 and "recover-strategy" in recreate["keys"]
    assert "process-recover-enable" in recreate["keys"]


@pytest.mark.parametrize(
    ("spec", "accepts"),
    [
        # 7.2+: the operator alone sets process-recover-enable, at creation (job.go:479-491): a push
        # of strategies leaves the retried Init refused (fault_recover_service.go:550-555).
        ({"mindcluster_version": "26.1", "strategies": ["recover", "dump"]}, False),
        # hotSwitch alone opens Init (:550-555), and the retry reads it (manager.go:468-492).
        ({"mindcluster_version": "26.1", "strategies": ["dump"], "sub_healthy_strategy": "hotSwitch"}, True),
        # Up to 7.1 we write process-recover-enable=on ourselves.
        ({"mindcluster_version": "7.1", "strategies": ["recover", "dump"]}, True),
    ],
)
def test_which_push_opens_a_refused_init(spec: dict[str, Any], accepts: bool) -> None:
    from apps.policies.desired import podgroup_accepts_init

    result = validate_policy(spec)
    assert result.spec is not None, result.errors
    assert podgroup_accepts_init(result.spec) is accepts


def test_a_written_hot_switch_says_the_next_init_retry_is_accepted() -> None:
    """D6: TaskD retries a refused Init every second (taskd/go/framework_backend/manager/manager.go:468-492)
    and ClusterD keeps nothing of the refusal (fault_recover_service.go:579-585)."""
    cluster = Cluster.objects.create(name=f"sim-{uuid.uuid4().hex[:6]}")
    job, _ = job_adopt(cluster=cluster, manifest=adopted_manifest("hs", "team-b", str(uuid.uuid4()), {}))
    incarnation_observe_podgroup(job, operator_podgroup(job, {"fault-scheduling": "grace"}, {}), "ingester")
    spec = {"mindcluster_version": "26.1", "strategies": ["dump"], "sub_healthy_strategy": "hotSwitch"}
    policy_revision_create(job=job, spec=spec, actor=ADMIN)
    view = in_effect(TrainingJob.objects.get(pk=job.pk))
    assert not any("accept Init" in n for n in view["notes"])  # not written yet
    applied(job, 2)
    view = in_effect(TrainingJob.objects.get(pk=job.pk))
    assert view["process_recovery"]["on"] is False
    assert any("revision 2 is written with keys that make ClusterD accept Init" in n for n in view["notes"])


def test_a_refused_init_event_is_not_a_snapshot() -> None:
    """A refused Init (ProcessRecoverEnableOff, code 403) records nothing in ClusterD
    (component/clusterd/pkg/application/recover/fault_recover_service.go:579-585): its Event carries the
    PodGroup as that retry read it, which must not stand for what the job was created with."""
    from django.utils import timezone

    from simcluster.clusterd.controller import EVENT_INIT, EVENT_INIT_REFUSED

    pg = {"kind": "PodGroup", "namespace": "ns", "name": f"job-{uuid.uuid4()}"}
    message = 'job(uid=u) init refused (code 403); config={"strategies": ["recover", "exit"]}'
    refused = init_snapshot_of(
        {"reason": EVENT_INIT_REFUSED, "involvedObject": pg, "message": message}, timezone.now()
    )
    assert refused is not None and refused.accepted is False
    event = {"reason": EVENT_INIT, "involvedObject": pg, "message": message}
    accepted = init_snapshot_of(event, timezone.now())
    assert accepted is not None and accepted.accepted is True


def test_keys_no_revision_has_are_observed_without_a_revision(job: TrainingJob) -> None:
    policy_revision_create(job=job, spec={"strategies": ["retry"]}, actor=ADMIN)
    grace = {"fault-scheduling": "grace"}
    incarnation_observe_podgroup(job, operator_podgroup(job, grace, {"recover-strategy": "dump"}), "ingester")
    view = in_effect(job)
    assert view["revision"] is None and view["basis"] == "observed"
    assert view["config"]["recover-strategy"] == "dump"


def test_clusterd_init_snapshot_wins_over_the_podgroup(job: TrainingJob) -> None:
    policy_revision_create(job=job, spec={"strategies": ["retry"]}, actor=ADMIN)
    policy_revision_create(job=job, spec={"strategies": ["recover"]}, actor=ADMIN)
    grace = {"fault-scheduling": "grace"}
    incarnation_observe_podgroup(job, operator_podgroup(job, grace, {"recover-strategy": "recover"}), "push")
    assert in_effect(job)["revision"] == 2
    incarnation_observe_init(
        job,
        job.uid,
        {"labels": {**grace, "process-recover-enable": "on"}, "annotations": {"recover-strategy": "retry"}},
        None,
    )
    view = in_effect(job)
    assert (view["revision"], view["observed_from"]) == (1, "clusterd-init")


def test_init_snapshot_event_parser_accepts_pairs_and_json() -> None:
    keys = snapshot_keys(
        "recover-strategy=retry,recover; fault-scheduling=grace; "
        "process-recover-enable=on; platform-mode=false"
    )
    assert keys == {
        "labels": {"fault-scheduling": "grace", "process-recover-enable": "on"},
        "annotations": {"recover-strategy": "retry,recover"},
    }
    as_json = snapshot_keys('config at Init: {"recover-strategy": ["dump"], "platform-mode": true}')
    assert as_json == {
        "labels": {},
        "annotations": {"recover-strategy": "dump", "ProcessRecoverStrategy": ""},
    }
    from django.utils import timezone

    event = {
        "reason": "RecoverConfigSnapshot",
        "involvedObject": {"kind": "PodGroup", "namespace": "ns", "name": f"job-{uuid.uuid4()}"},
        "message": "recover-strategy=retry",
    }
    found = init_snapshot_of(event, timezone.now())
    assert found is not None and found.job.name == "job" and found.job.uid
    assert init_snapshot_of({**event, "reason": "FaultDetected"}, timezone.now()) is None


def test_init_snapshot_of_the_built_in_clusterd_event() -> None:
    """The built-in ClusterD publishes its Init snapshot (GetRecoverBaseInfo,
    component/clusterd/pkg/domain/common/utils.go:100-140) as ``InitSuccess``: its strategy list has
    the rescheduling switches as pseudo-strategies and always ``exit`` (utils.go:114-123)."""
    from simcluster.clusterd.controller import INIT_MESSAGE_PREFIX

    config = {
        "strategies": ["retry", "recover", "pod-rescheduling", "job-rescheduling", "exit"],
        "process-recover-enable": "on",
        "platform-mode": False,
        "subHealthyStrategy": "ignore",
    }
    keys = snapshot_keys(f"job(uid=u1){INIT_MESSAGE_PREFIX}{json.dumps(config, sort_keys=True)}")
    assert keys == {
        "labels": {
            "fault-scheduling": "grace",
            "pod-rescheduling": "on",
            "process-recover-enable": "on",
            "subHealthyStrategy": "ignore",
        },
        "annotations": {"recover-strategy": "retry,recover,exit"},
    }
    off = snapshot_keys(f"job(uid=u1){INIT_MESSAGE_PREFIX}" + json.dumps({**config, "strategies": ["exit"]}))
    assert off is not None and off["labels"]["fault-scheduling"] == "off"
