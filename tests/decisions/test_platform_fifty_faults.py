"""50 platform-mode faults in a row, real order: never a code 508, never an empty standing answer.

ClusterD gives up with ``WaitPlatStrategyTimeout`` (508, ``component/clusterd/pkg/domain/common/code.go:75``)
when ``ProcessRecoverStrategy`` is not retry/recover/dump for 300 s at a fault
(``component/clusterd/pkg/application/recover/fault_recover_platform_plugin.go:43-57``,
``controller.go:664-673``), and with 509 (``code.go:77``) when the previous question was not cleared or
no ``ProcessResultFault`` came. Five jobs take ten faults each, one after the other per job as faults
come in life (each after the previous recovery finished), with the decider and a Celery worker
running; a sampler reads every PodGroup all along.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from django.db import connection
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.decisions.models import Decision
from apps.jobs.models import TrainingJob
from mindcluster import keys as c
from simcluster.runtime import SimCluster
from tests.decisions.platform_fixtures import Platform, platform
from tests.support import wait_for

__all__ = ["platform"]  # fixtures used by name

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

JOBS = 5
FAULTS_PER_JOB = 10
# (pod rank, fault type): retry by rule, recover by rule, dump by rule (a whole node), retry for HCCL.
PATTERN = [(1, "uce"), (2, "normal"), (1, "hccl"), (3, "normal"), (2, "node")]
STANDING = ("retry", "recover", "dump")


@pytest.fixture(scope="module")
def sim() -> Iterator[SimCluster]:
    # A cluster of this module's own, not the shared one: ``active_jobs`` reads ClusterD's faults across the
    # whole cluster, and the test waits for it to be empty; a fault an earlier module left would count.
    # 1 simulated second = 5 ms: ClusterD's 3 s poll is 15 ms, its 300 s limit 1.5 s.
    cluster = SimCluster(clock_speed=200, seed=13).start()
    yield cluster
    cluster.stop()


def active_jobs(sim: SimCluster) -> set[str]:
    """Uids of the jobs ClusterD is still handling a fault for."""
    assert sim.clusterd is not None
    return set(sim.clusterd.fault_snapshot())


class Sampler:
    """Reads every job's PodGroup in a loop and keeps each ProcessRecoverStrategy value seen."""

    def __init__(self, sim: SimCluster, jobs: list[TrainingJob]) -> None:
        api = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
        self.custom = k8s.CustomObjectsApi(api)
        self.names = [f"{job.name}-{job.uid}" for job in jobs]
        self.seen: Counter[str] = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            for name in self.names:
                pg = self.custom.get_namespaced_custom_object(
                    c.PODGROUP_GROUP, c.PODGROUP_VERSION, "default", c.PODGROUP_PLURAL, name
                )
                annotations = pg["metadata"].get("annotations") or {}
                self.seen[annotations.get(c.ANNOTATION_PLATFORM_STRATEGY, "<absent>")] += 1


def test_fifty_faults_never_wait_for_a_standing_answer(sim: SimCluster, platform: Platform) -> None:
    platform.start_worker()
    jobs = [platform.job() for _ in range(JOBS)]
    platform.decide()
    sampler = Sampler(sim, jobs)
    sampler.thread.start()
    started = time.monotonic()

    def fault_loop(job: TrainingJob) -> None:
        for i in range(FAULTS_PER_JOB):
            rank, kind = PATTERN[i % len(PATTERN)]
            sim.inject_fault("default", job.name, rank=rank, fault_type=kind, recovers=True)
            done = i + 1
            wait_for(
                lambda done=done: Decision.objects.filter(job=job, state="completed").count() == done,
                30,
                f"{job.name}: decision {done} completed",
            )
            wait_for(lambda: job.uid not in active_jobs(sim), 30, f"{job.name}: fault {done} over")

    errors: list[BaseException] = []

    def guarded(job: TrainingJob) -> None:
        try:
            fault_loop(job)
        except BaseException as exc:  # surfaced below with the job's name
            errors.append(exc)
        finally:
            connection.close()  # this thread's own database connection

    threads = [threading.Thread(target=guarded, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert sim.wait_idle(30)
    elapsed = time.monotonic() - started
    sampler.stop.set()
    sampler.thread.join(10)
    assert not errors, errors

    assert sim.clusterd is not None
    runs = [steps for _, steps in sim.clusterd.history if any(s.kind == "choose" for s in steps)]
    codes = Counter(step.code for _, steps in sim.clusterd.history for step in steps if step.code)
    api = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
    names = {job.name for job in jobs}
    events = k8s.CoreV1Api(api).list_namespaced_event("default").items
    reasons = Counter(e.reason for e in events if e.involved_object.name in names)
    decisions = Decision.objects.filter(job__in=jobs)
    by_strategy = Counter(decisions.values_list("strategy", flat=True))
    print(
        f"\n{len(runs)} faults in {elapsed:.1f} s; decisions {dict(by_strategy)}; "
        f"PlatformStrategy events {reasons['PlatformStrategy']}; step codes {dict(codes)}; "
        f"standing values sampled {dict(sampler.seen)}"
    )
    assert len(runs) == JOBS * FAULTS_PER_JOB == 50
    assert decisions.filter(state="completed").count() == 50
    assert codes[508] == 0 and reasons["WaitPlatStrategyTimeout"] == 0  # 0 x code 508
    assert reasons["ConfirmFaultNotCleared"] == 0 and reasons["WaitProcessResultFaultTimeout"] == 0  # 0 x 509
    assert reasons["PlatformStrategy"] == 50  # every fault was asked and answered
    # Each fault got the answer its own rule gives (a stale copy of the previous question never
    # answered the next one): uce/hccl → retry, normal → recover, a whole node → dump.
    assert by_strategy == {"retry": 20, "recover": 20, "dump": 10}
    # ProcessRecoverStrategy was never empty or absent; between faults it was the standing answer.
    assert "" not in sampler.seen and "<absent>" not in sampler.seen
    assert set(sampler.seen) <= {*STANDING, "exit"}
    assert elapsed < 120
