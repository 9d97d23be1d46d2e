"""Platform mode end to end: the simulated ClusterD asks, the control plane answers.

Real parts only: the simulated cluster (API emulator + operator + ClusterD + TaskD) over HTTP, the
PodGroup watcher, a real Celery worker writing the answers, PostgreSQL and a private Redis.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.contrib.auth.models import User

from apps.audit.models import AuditEntry
from apps.decisions.services import decision_answer, decisions_sweep
from apps.events.models import JobEvent
from mindcluster import keys as c
from simcluster.runtime import SimCluster
from tests.decisions.platform_fixtures import (
    POLICY,
    Platform,
    decision_after_fault,
    decision_for,
    platform,
    podgroup_of,
    sim_clock_speed,
)
from tests.support import wait_for
from tests.support.sim import clock_speed

__all__ = ["POLICY", "platform", "sim_clock_speed"]  # fixtures used by name

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.mark.parametrize(
    ("fault_type", "rank", "strategy", "decided_by"),
    [
        ("uce", 1, "retry", "rule:0"),
        ("hccl", 1, "retry", "rule:0"),
        ("node", 2, "dump", "rule:1"),
        ("normal", 1, "recover", "rule:3"),
    ],
)
def test_rule_based_decision_for_each_fault_type(
    sim: SimCluster,
    platform: Platform,
    fault_type: str,
    rank: int,
    strategy: str,
    decided_by: str,
) -> None:
    job = platform.running_job()
    decision = decision_after_fault(sim, job, {"completed"}, rank=rank, fault_type=fault_type)
    assert decision.strategy == strategy
    assert decision.decided_by == decided_by
    assert decision.outcome  # ClusterD reported the outcome (e.g. retry-success)
    assert decision.latency_ms is not None and decision.latency_ms < 5_000
    kinds = list(JobEvent.objects.filter(job=job, source="decision").values_list("kind", flat=True))
    assert kinds[:2] == ["decision.requested", "decision.answered"] and "decision.completed" in kinds
    assert AuditEntry.objects.filter(action="decision.open", object_id=str(decision.pk)).exists()
    # Keys cleared so ClusterD can confirm the next fault; platform mode itself stays on.
    pg = podgroup_of(sim, job)
    annotations = pg["metadata"]["annotations"]
    wait_for(
        lambda: not podgroup_of(sim, job)["metadata"]["annotations"].get(c.ANNOTATION_CONFIRM_FAULT),
        10,
        "ProcessConfirmFault cleared",
    )
    assert c.ANNOTATION_PLATFORM_STRATEGY in annotations


def test_a_person_answers_in_the_inbox_before_the_deadline(sim: SimCluster, platform: Platform) -> None:
    platform.start_worker()
    operator = User.objects.create_user("oncall")
    job = platform.job({**POLICY, "decision_timeout_s": 60})
    platform.decide()
    pending = decision_after_fault(sim, job, {"pending"}, rank=0, fault_type="normal")  # global rank 0 → ask
    assert pending.deadline_at is not None
    wait_for(lambda: JobEvent.objects.filter(job=job, kind="decision.requested").exists(), 5, "the event")
    decision_answer(decision_id=pending.pk, strategy="dump", user=operator)
    done = decision_for(job, {"completed"})
    assert done.strategy == "dump" and done.decided_by == "user:oncall"
    assert AuditEntry.objects.filter(action="decision.answer", actor=operator).exists()


def test_no_answer_means_the_default_at_the_deadline_and_clusterd_proceeds(
    sim: SimCluster, platform: Platform
) -> None:
    job = platform.running_job()  # decision_timeout_s = 3, well inside ClusterD's 300 s
    # At this module's 50x ClusterD's 300 s are 6 s, only 3 s more than the deadline: a loaded
    # machine ate them. At 20x they are 15 s (the deadline is 60 simulated s: still well inside).
    with clock_speed(sim, 20):
        pending = decision_after_fault(sim, job, {"pending"}, rank=0, fault_type="normal")
        done = decision_for(job, {"completed"}, timeout=30)
    assert done.pk == pending.pk
    assert done.strategy == "recover" and done.decided_by == "default:deadline"
    assert done.outcome.startswith("recover")


def test_two_jobs_faulting_at_once_get_independent_decisions(sim: SimCluster, platform: Platform) -> None:
    platform.start_worker()
    first, second = platform.job(), platform.job()
    platform.decide()
    sim.inject_fault("default", first.name, rank=1, fault_type="uce", recovers=True)
    sim.inject_fault("default", second.name, rank=2, fault_type="node", recovers=True)
    a = decision_for(first, {"completed"})
    b = decision_for(second, {"completed"})
    assert (a.strategy, b.strategy) == ("retry", "dump")
    assert a.faults != b.faults


def test_a_decision_survives_a_restart_of_the_worker(sim: SimCluster, platform: Platform) -> None:
    worker = platform.start_worker(private=True)  # killed below: a process of this test's own
    job = platform.job()
    platform.decide()
    # Starting the new worker takes real seconds (more on a loaded machine) while ClusterD waits for
    # the answer (300 simulated s, 6 s at this module's 50x): at 10x it waits 30 s.
    with clock_speed(sim, 10):
        pending = decision_after_fault(sim, job, {"pending"}, rank=0, fault_type="normal")
        assert worker.proc is not None
        os.killpg(worker.proc.pid, signal.SIGKILL)  # the countdown message it held is gone with it
        worker.proc.wait(10)
        worker.proc = None
        platform.start_worker(private=True)  # a new worker process
        time.sleep(max(0.0, (pending.deadline_at.timestamp() - time.time())) + 0.2)  # type: ignore[union-attr]
        decisions_sweep()  # what beat runs every few seconds
        done = decision_for(job, {"completed"}, timeout=30)
    assert done.pk == pending.pk and done.decided_by == "default:deadline"
