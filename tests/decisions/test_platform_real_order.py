"""Platform mode in the real order, end to end (issue #13 item 5; mindcluster-source-facts.md §2).

The simulated ClusterD follows ``component/clusterd/pkg/application/recover/`` of Ascend/mind-cluster
(22bb3d98): it waits for a standing answer before anything else (``controller.go:664-676``), asks with
``ProcessConfirmFault`` (``:815-822``), waits for the key ``ProcessResultFault`` and re-reads the answer
(``:824-837``), and checks ``RankTableReady`` before a recover (``:1219-1232``). The product side is real:
the rendered manifest, the decider's PodGroup watch, the decision service, the REST API, PostgreSQL.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from rest_framework.test import APIClient

from apps.decisions.models import Decision
from apps.decisions.services import ABANDONED_AFTER_S, NO_STATUS, decisions_sweep
from apps.jobs.models import TrainingJob
from mindcluster import keys as c
from simcluster.runtime import SimCluster
from tests.decisions.platform_fixtures import (
    GAVE_UP,
    POLICY,
    Platform,
    annotate_podgroup,
    clusterd_reasons,
    decision_after_fault,
    decision_for,
    platform,
    podgroup_of,
    sim_clock_speed,
)
from tests.support import wait_for

__all__ = ["platform", "sim_clock_speed"]  # fixtures used by name

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# fault_recover_platform_plugin.go:30-35: what ClusterD accepts before it asks
STANDING = ("retry", "recover", "dump")


# The simulated ClusterD's reasons for the fault-retry way: 508 (code.go:75) and 509 (code.go:77).
def annotations_of(sim: SimCluster, job: TrainingJob) -> dict[str, str]:
    return dict(podgroup_of(sim, job)["metadata"].get("annotations") or {})


def settled(sim: SimCluster, job: TrainingJob) -> dict[str, str]:
    """Wait until the question is cleared and the standing answer is back; return the annotations."""
    return wait_for(
        lambda: (
            (a := annotations_of(sim, job))
            and not a.get(c.ANNOTATION_CONFIRM_FAULT)
            and c.ANNOTATION_RESULT_FAULT not in a
            and a.get(c.ANNOTATION_PLATFORM_STRATEGY) in STANDING
            and a
        ),
        10,
        "question cleared, standing answer restored",
    )


def test_the_standing_answer_is_rendered_and_on_the_podgroup_from_creation(
    sim: SimCluster, platform: Platform
) -> None:
    job = platform.job({**POLICY, "default_strategy": "dump"})  # no decider running yet
    api = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
    ascendjob = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, job.namespace, c.ASCENDJOB_PLURAL, job.name
    )
    assert ascendjob["metadata"]["annotations"][c.ANNOTATION_PLATFORM_STRATEGY] == "dump"
    # The operator copied it to the PodGroup at creation: platform mode on, a standing answer in place.
    assert annotations_of(sim, job)[c.ANNOTATION_PLATFORM_STRATEGY] == "dump"


def test_rules_answer_in_the_real_order_and_the_standing_answer_comes_back(
    sim: SimCluster, platform: Platform
) -> None:
    job = platform.running_job()
    decision = decision_after_fault(sim, job, {"completed"}, rank=1, fault_type="uce")
    assert (decision.strategy, decision.decided_by) == ("retry", "rule:0")
    assert decision.confirm_fault == "8:0"  # pod rank 1 x 8 NPUs, UCE type "0" (const.go:205)
    assert decision.outcome == "retry-success"
    after = settled(sim, job)
    assert after[c.ANNOTATION_PLATFORM_STRATEGY] == "recover"  # the policy's default_strategy again
    assert after[c.ANNOTATION_RANK_TABLE_READY] == "true"
    assert sim.wait_idle(20)
    reasons = clusterd_reasons(sim, job)
    # Asked only after training was stopped, answered before the strategy was chosen.
    assert reasons.index("FaultDetected") < reasons.index("WaitingForPlatform")
    assert reasons.index("WaitingForPlatform") < reasons.index("PlatformStrategy")
    assert reasons.index("PlatformStrategy") < reasons.index("StrategyChosen")
    assert not GAVE_UP & set(reasons)


def test_a_node_fault_asks_about_every_rank_of_the_pod_and_the_answer_repeats_them_all(
    sim: SimCluster, platform: Platform
) -> None:
    job = platform.running_job()
    decision = decision_after_fault(sim, job, {"completed"}, rank=2, fault_type="node")
    assert decision.strategy == "dump" and decision.decided_by == "rule:1"
    assert decision.confirm_fault == ",".join(f"{rank}:1" for rank in range(16, 24))
    assert [f["rank"] for f in decision.faults] == list(range(16, 24))
    assert sim.wait_idle(20)
    assert not GAVE_UP & set(clusterd_reasons(sim, job))


def test_the_decider_writes_a_standing_answer_where_it_is_missing(
    sim: SimCluster, platform: Platform
) -> None:
    platform.start_worker()
    job = platform.job()
    # A PodGroup from an older render (ProcessRecoverStrategy=""): ClusterD would wait 300 s → 508.
    annotate_podgroup(sim, job, {c.ANNOTATION_PLATFORM_STRATEGY: ""})
    platform.decide()
    wait_for(
        lambda: annotations_of(sim, job).get(c.ANNOTATION_PLATFORM_STRATEGY) == "recover",
        10,
        "the standing answer written",
    )
    decision = decision_after_fault(sim, job, {"completed"}, rank=1, fault_type="normal")
    assert decision.strategy == "recover" and decision.outcome == "recover-success"
    assert sim.wait_idle(20)
    assert not GAVE_UP & set(clusterd_reasons(sim, job))


def test_a_person_answers_through_the_api_and_clusterd_uses_it(
    sim: SimCluster,
    platform: Platform,
    superuser_client: APIClient,
) -> None:
    job = platform.running_job({**POLICY, "decision_timeout_s": 60})
    pending = decision_after_fault(sim, job, {"pending"}, rank=0, fault_type="normal")  # rank 0 → ask
    # While a person decides, the standing answer stays and ClusterD waits for the result key.
    waiting = annotations_of(sim, job)
    assert waiting[c.ANNOTATION_PLATFORM_STRATEGY] == "recover"
    assert c.ANNOTATION_RESULT_FAULT not in waiting and waiting[c.ANNOTATION_CONFIRM_FAULT] == "0:1"
    answer = superuser_client.post(f"/api/v1/decisions/{pending.pk}/", {"strategy": "dump"}, format="json")
    assert answer.status_code == 200, answer.json()
    done = decision_for(job, {"completed"})
    assert done.strategy == "dump" and done.decided_by == "user:root"
    assert done.outcome == "dump-success"
    assert settled(sim, job)[c.ANNOTATION_PLATFORM_STRATEGY] == "recover"
    assert sim.wait_idle(20)
    assert "StrategyChosen" in clusterd_reasons(sim, job)
    assert not GAVE_UP & set(clusterd_reasons(sim, job))


def test_a_late_answer_is_refused_with_409_and_the_default_goes_out(
    sim: SimCluster,
    platform: Platform,
    superuser_client: APIClient,
) -> None:
    # No Celery worker: nothing expires the question on time, so it is still pending when the
    # person answers after the deadline; the API must refuse and write the default itself.
    job = platform.job({**POLICY, "decision_timeout_s": 1})
    platform.decide()
    pending = decision_after_fault(sim, job, {"pending"}, rank=0, fault_type="normal")
    assert pending.deadline_at is not None
    time.sleep(max(0.0, pending.deadline_at.timestamp() - time.time()) + 0.1)
    late = superuser_client.post(f"/api/v1/decisions/{pending.pk}/", {"strategy": "dump"}, format="json")
    assert late.status_code == 409, late.json()
    error: dict[str, Any] = late.json()["errors"][0]
    assert error["code"] == "decision_closed" and error["field"] == "strategy"
    assert "too late" in error["message"] and "recover" in error["message"]
    done = decision_for(job, {"completed"})
    assert done.pk == pending.pk
    assert (done.strategy, done.decided_by) == ("recover", "default:deadline")
    assert Decision.objects.get(pk=pending.pk).answered_by is None
    assert sim.wait_idle(20)
    assert not GAVE_UP & set(clusterd_reasons(sim, job))


def test_an_answer_clusterd_never_used_is_cleared_by_the_sweep(sim: SimCluster, platform: Platform) -> None:
    # The decider was down for more than 300 s: ClusterD gave up (509) and its question stayed on the
    # PodGroup; the answer written on restart is never reported on. Left alone, ClusterD would refuse
    # every later question (fault_recover_platform_plugin.go:69-72).
    job = platform.job()
    annotate_podgroup(
        sim,
        job,
        {
            c.ANNOTATION_CONFIRM_FAULT: "8:1",
            c.ANNOTATION_RESULT_FAULT: "8:1",
            c.ANNOTATION_PLATFORM_STRATEGY: "exit",
        },
    )
    old = timezone.now() - timedelta(seconds=ABANDONED_AFTER_S + 1)
    decision = Decision.objects.create(
        job=job,
        podgroup=f"{job.name}-{job.uid}",
        confirm_fault="8:1",
        faults=[{"rank": 8, "type": "1"}],
        state=Decision.State.WRITTEN,
        strategy="exit",
        decided_at=old,
        written_at=old,
    )
    assert decisions_sweep() == 1
    decision.refresh_from_db()
    assert (decision.state, decision.outcome) == ("completed", NO_STATUS)
    after = settled(sim, job)
    assert after[c.ANNOTATION_PLATFORM_STRATEGY] == "recover"
