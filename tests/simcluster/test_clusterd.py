"""Simulated ClusterD end to end: faults in, what the real ClusterD writes out.

Rows from mindcluster.md §3.2, §6.4 and §7.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from mindcluster import keys as k
from simcluster.injector import FaultSpecError, UnknownJobError
from tests.support import wait_for
from tests.support.sim import (
    clock_speed,
    conditions,
    create_job,
    event_reasons,
    events_text,
    make_job,
    podgroup_of,
)


def pg_label(kube, job) -> str | None:
    return (
        (podgroup_of(kube, job) or {})
        .get("metadata", {})
        .get("labels", {})
        .get(k.LABEL_PROCESS_RECOVER_ENABLE)
    )


def pg_annotation(kube, job, key: str) -> str | None:
    return (podgroup_of(kube, job) or {}).get("metadata", {}).get("annotations", {}).get(key)


def chosen(kube, job) -> list[str]:
    return [
        e["message"].split(":")[0]
        for e in kube.list_events(job["metadata"]["namespace"], job["metadata"]["name"])
        if e["reason"] == "StrategyChosen"
    ]


class LabelRecorder:
    """Polls the PodGroup label in the background to catch short-lived values such as ``pause``."""

    def __init__(self, kube, job) -> None:
        self.values: list[str | None] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(kube, job), daemon=True)
        self._thread.start()

    def _run(self, kube, job) -> None:
        while not self._stop.is_set():
            self._record(pg_label(kube, job))
            time.sleep(0.01)

    def _record(self, value: str | None) -> None:
        if not self.values or self.values[-1] != value:
            self.values.append(value)

    def stop(self, kube, job) -> list[str | None]:
        self._stop.set()
        self._thread.join()
        self._record(pg_label(kube, job))  # the final value, however fast the last step was
        return self.values


def test_uce_fault_with_retry_recover_dump_is_retried(sim, kube) -> None:
    job = create_job(kube, make_job("cd-uce"))
    sim.inject_fault("default", "cd-uce", rank=1, fault_type="uce", recovers=True)
    assert sim.wait_idle(20)
    assert chosen(kube, job) == ["retry"]
    assert pg_annotation(kube, job, k.ANNOTATION_RECOVER_STATUS) == "retry-success"
    reset = json.loads(kube.get_configmap("default", "reset-config-cd-uce")["data"]["reset.json"])
    # The recovery ends with reset()'s ClearOperation (controller.go:221-227): no ranks, nothing flushing;
    # a retry writes no restartAllProcess, so RetryTime stays 0 (utils.go:231-269, facts D12).
    assert reset["RankList"] == []
    assert reset["FaultFlushing"] is False and reset["RetryTime"] == 0
    assert [p["metadata"]["labels"]["version"] for p in kube.list_job_pods("default", "cd-uce")] == ["0", "0"]


def test_normal_fault_with_retry_recover_dump_is_recovered_and_the_pod_migrates(sim, kube) -> None:
    job = create_job(kube, make_job("cd-normal"))
    node_before = kube.list_job_pods("default", "cd-normal")[1]["spec"]["nodeName"]
    sim.inject_fault("default", "cd-normal", rank=1, fault_type="normal", level="SeparateNPU", recovers=True)
    assert sim.wait_idle(20)
    assert chosen(kube, job) == ["recover"]
    assert pg_annotation(kube, job, k.ANNOTATION_RECOVER_STATUS) == "recover-success"
    worker = kube.list_job_pods("default", "cd-normal")[1]
    assert worker["spec"]["nodeName"] != node_before
    assert worker["metadata"]["labels"]["version"] == "0"


def test_recover_failing_falls_to_dump_then_dump_exit_and_rescheduling(sim, kube) -> None:
    # Issue 13 changed this: after a failed recover ClusterD goes dump → dump-exit signal and waits
    # for Volcano (controller.go:1153-1158, 1446-1458); it writes dump-failed, no exit-completed.
    # Issue 25 corrects the label: a dump result ends in CheckResultFinish → ListenScheduleResult →
    # FaultClear → FaultRetry, which pauses the label and sets it on again once the job runs
    # (rules.go:236-275, controller.go:1534-1568), not only after a 508.
    job = create_job(kube, make_job("cd-fail"))
    recorder = LabelRecorder(kube, job)
    sim.inject_fault("default", "cd-fail", rank=1, fault_type="normal", recovers=False)
    assert sim.wait_idle(20)
    labels = recorder.stop(kube, job)
    assert chosen(kube, job) == ["recover", "dump"]
    assert labels == ["on", "pause", "on"]
    reasons = event_reasons(kube, job)
    assert reasons.index("ProcessExited") < reasons.index("JobRescheduled")
    assert pg_annotation(kube, job, k.ANNOTATION_RECOVER_STATUS) == "dump-failed"
    assert {p["metadata"]["labels"]["version"] for p in kube.list_job_pods("default", "cd-fail")} == {"1"}
    job = kube.get_job("default", "cd-fail")
    types = [(c["type"], c["status"], c["reason"]) for c in job["status"]["conditions"]]
    assert ("Restarting", "False", "jobRestarting") in types and types[-1][:2] == ("Running", "True")
    records = json.loads(
        kube.get_configmap("mindx-dl", "job-reschedule-reason")["data"]["recent-reschedule-records"]
    )
    entry = records[f"default/cd-fail-{job['metadata']['uid']}"]
    assert entry["TotalRescheduleTimes"] == 1
    assert {t["PodName"] for t in entry["RescheduleRecords"][0]["ReasonOfTask"]} == {
        "cd-fail-master-0",
        "cd-fail-worker-0",
    }


def test_per_attempt_outcomes(sim, kube) -> None:
    job = create_job(kube, make_job("cd-list"))
    sim.inject_fault("default", "cd-list", rank=1, fault_type="uce", recovers=[False, True])
    assert sim.wait_idle(20)
    assert chosen(kube, job) == ["retry", "recover"]
    assert pg_annotation(kube, job, k.ANNOTATION_RECOVER_STATUS) == "recover-success"


def test_recover_in_place_for_business_fault_only(sim, kube) -> None:
    """recover-in-place only for a fault the process can be restored from in place; a node fault
    goes to recover (component/clusterd/pkg/application/recover/controller.go:1023-1030)."""
    job = create_job(kube, make_job("cd-inplace", strategies="recover,recover-in-place"))
    sim.inject_fault("default", "cd-inplace", rank=1, fault_type="normal", recovers=True)
    # The node fault once the business fault is handled: injected at once, on a loaded machine the
    # second arrived before the first was handled and the test saw only "recover" (one fresh clone
    # at stop 38; it passed alone).
    assert sim.wait_idle(20)
    sim.inject_fault("default", "cd-inplace", rank=1, fault_type="node", recovers=True)
    assert sim.wait_idle(20)
    assert chosen(kube, job) == ["recover-in-place", "recover"]


def test_pod_rescheduling_recreates_only_the_faulty_pod(sim, kube) -> None:
    job = create_job(
        kube, make_job("cd-podlevel", strategies=None, labels={"pod-rescheduling": "on"}, workers=2)
    )
    sim.inject_fault("default", "cd-podlevel", rank=2, fault_type="node")
    assert sim.wait_idle(20)
    versions = [p["metadata"]["labels"]["version"] for p in kube.list_job_pods("default", "cd-podlevel")]
    assert versions == ["0", "0", "1"]
    assert "PodRescheduled" in event_reasons(kube, job)


def test_rank0_failure_always_means_job_level(sim, kube) -> None:
    job = create_job(kube, make_job("cd-rank0", strategies=None, labels={"pod-rescheduling": "on"}))
    sim.inject_fault("default", "cd-rank0", rank=0, fault_type="node")
    assert sim.wait_idle(20)
    assert "JobRescheduled" in event_reasons(kube, job)


def test_backoff_limit_exhausted_fails_the_job(sim, kube) -> None:
    """The restart budget is the backoffLimit recorded at creation
    (component/ascend-operator/pkg/controllers/v1/ascendjob_controller.go:361-386); a rescheduling
    past it fails the job."""
    job = create_job(kube, make_job("cd-budget", strategies=None, backoff_limit=1))
    sim.inject_fault("default", "cd-budget", rank=1, fault_type="node")
    # The second fault once the first is handled: injected at once, on a loaded machine the second
    # arrived while the first's rescheduling was under way and the job kept running (one fresh clone
    # at stop 39; it passed alone), as the recover-in-place test above.
    assert sim.wait_idle(20)
    sim.inject_fault("default", "cd-budget", rank=1, fault_type="node")
    assert sim.wait_idle(20)
    job = kube.get_job("default", "cd-budget")
    assert job["status"]["conditions"][-1]["type"] == "Failed"
    assert job["status"]["conditions"][-1]["reason"] == "JobFailed"
    assert "budget" in job["status"]["conditions"][-1]["message"]


def test_fault_retry_times_remain_count(sim, kube) -> None:
    job = create_job(kube, make_job("cd-retrytimes", strategies=None, labels={"fault-retry-times": "3"}))
    sim.inject_fault("default", "cd-retrytimes", rank=1, fault_type="normal")
    assert sim.wait_idle(20)
    cm = kube.get_configmap("volcano-system", "vcjob-fault-npu-cm")
    remain = json.loads(cm["data"]["remain-retry-times"])
    assert remain[f"default/cd-retrytimes-{job['metadata']['uid']}"] == {
        "UUID": job["metadata"]["uid"],
        "Times": 2,
    }


def test_no_rescheduling_configured_fails_the_job(sim, kube) -> None:
    create_job(kube, make_job("cd-norescheduling", strategies=None, labels={"fault-scheduling": "off"}))
    sim.inject_fault("default", "cd-norescheduling", rank=1, fault_type="normal")
    assert sim.wait_idle(20)
    assert conditions(kube.get_job("default", "cd-norescheduling"))[-1] == "Failed"


# --- platform mode ---------------------------------------------------------------------------------------
def answer_platform(
    kube, job, strategy: str, clear_after: bool = False, rank_table: bool = True
) -> threading.Thread:
    """Act as the platform: wait for ProcessConfirmFault, then answer with ``strategy``."""

    def run() -> None:
        confirm = wait_for(lambda: pg_annotation(kube, job, k.ANNOTATION_CONFIRM_FAULT), timeout=15)
        meta = podgroup_of(kube, job)["metadata"]
        kube.patch_podgroup(
            "default",
            meta["name"],
            {
                "metadata": {
                    "annotations": {
                        k.ANNOTATION_PLATFORM_STRATEGY: strategy,
                        k.ANNOTATION_RESULT_FAULT: confirm,
                        **({k.ANNOTATION_RANK_TABLE_READY: "true"} if rank_table else {}),
                    }
                }
            },
        )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(("strategy", "fault"), [("retry", "uce"), ("recover", "uce"), ("dump", "normal")])
def test_platform_mode_waits_and_accepts_the_answer(sim, kube, strategy: str, fault: str) -> None:
    name = f"cd-plat-{strategy}"
    # A standing answer is in place before the fault (issue #13): ClusterD waits for one before it asks.
    annotations = {k.ANNOTATION_PLATFORM_STRATEGY: "retry"}
    if strategy == "recover":  # recover waits for RankTableReady exactly "true" (controller.go:1219-1233)
        annotations[k.ANNOTATION_RANK_TABLE_READY] = "true"
    # From v26.0 a hardware fault in platform mode first gets preExitProcess: retry is not "supported"
    # before the platform's answer is read (fault_recover_service.go:181-187, controller.go:364-370;
    # source facts D5), so the step retry is a v7.x path.
    release = "7.3" if strategy == "retry" else "26.1"
    job = create_job(kube, make_job(name, annotations=annotations, release=release))
    platform = answer_platform(kube, job, strategy)
    sim.inject_fault("default", name, rank=1, fault_type=fault, recovers=True)
    assert sim.wait_idle(20)
    platform.join(5)
    assert chosen(kube, job)[0] == strategy
    assert pg_annotation(kube, job, k.ANNOTATION_CONFIRM_FAULT) == ("8:0" if fault == "uce" else "8:1")
    assert pg_annotation(kube, job, k.ANNOTATION_RECOVER_STATUS) == f"{strategy}-success"


def test_platform_mode_times_out_with_508_then_exits(sim, kube) -> None:
    job = create_job(kube, make_job("cd-plat-timeout", annotations={k.ANNOTATION_PLATFORM_STRATEGY: "none"}))
    started = time.monotonic()
    sim.inject_fault("default", "cd-plat-timeout", rank=1, fault_type="uce", recovers=True)
    assert sim.wait_idle(20)
    assert time.monotonic() - started >= 300 / 500  # the full (scaled) 300 s wait
    text = events_text(kube, job)
    assert "WaitPlatStrategyTimeout" in text and "508" in text
    # Issue 13: 508 → fault-retry (pause, dump-exit, re-enable), no strategy chosen and no
    # exit-completed (controller.go:1534-1566).
    assert chosen(kube, job) == []
    reasons = event_reasons(kube, job)
    assert reasons.index("ProcessRecoverPaused") < reasons.index("ProcessRecoverResumed")
    assert pg_annotation(kube, job, k.ANNOTATION_RECOVER_STATUS) is None


def test_platform_mode_refuses_to_overwrite_uncleared_confirm_fault(sim, kube) -> None:
    # fault_recover_platform_plugin.go:69-72: refused at once (no waiting), code 509, fault retry.
    job = create_job(
        kube,
        make_job(
            "cd-plat-busy",
            annotations={k.ANNOTATION_PLATFORM_STRATEGY: "retry", k.ANNOTATION_CONFIRM_FAULT: "3:1"},
        ),
    )
    refusals_before = sim.clusterd.confirm_refusals
    sim.inject_fault("default", "cd-plat-busy", rank=1, fault_type="uce", recovers=True)
    assert sim.wait_idle(20)
    assert sim.clusterd.confirm_refusals == refusals_before + 1
    assert pg_annotation(kube, job, k.ANNOTATION_CONFIRM_FAULT) == "3:1"  # never overwritten
    assert "ConfirmFaultNotCleared" in event_reasons(kube, job)
    assert "509" in events_text(kube, job)
    # 509 goes the fault-retry way like 508, no strategy chosen
    # (component/clusterd/pkg/application/recover/rules.go:184-185).
    assert chosen(kube, job) == []


def test_rank_table_ready_gates_recover(sim, kube) -> None:
    # The test patches RankTableReady in real time while ClusterD waits (300 simulated s, 0.6 s at
    # this package's 500x): at 50x the wait is 6 s, wide enough for a loaded machine.
    with clock_speed(sim, 50):
        rank_table_ready_gates_recover(sim, kube)


def rank_table_ready_gates_recover(sim, kube) -> None:
    job = create_job(
        kube,
        make_job(
            "cd-ranktable",
            annotations={k.ANNOTATION_PLATFORM_STRATEGY: "recover"},  # RankTableReady absent: wait
        ),
    )
    platform = answer_platform(kube, job, "recover", rank_table=False)
    sim.inject_fault("default", "cd-ranktable", rank=1, fault_type="normal", recovers=True)
    platform.join(10)
    time.sleep(0.05)
    assert chosen(kube, job) == []  # still waiting for the RankTable
    name = podgroup_of(kube, job)["metadata"]["name"]
    kube.patch_podgroup(
        "default", name, {"metadata": {"annotations": {k.ANNOTATION_RANK_TABLE_READY: "true"}}}
    )
    assert sim.wait_idle(20)
    assert chosen(kube, job) == ["recover"]


# --- bad input -----------------------------------------------------------------------------------------
def test_bad_fault_input_raises_clear_errors(sim) -> None:
    with pytest.raises(UnknownJobError, match="default/no-such-job"):
        sim.inject_fault("default", "no-such-job", rank=0, fault_type="uce")
    with pytest.raises(FaultSpecError, match="type"):
        sim.inject_fault("default", "cd-uce", rank=0, fault_type="meteor")
    with pytest.raises(FaultSpecError, match="rank"):
        sim.inject_fault("default", "cd-uce", rank=-1)
    with pytest.raises(FaultSpecError, match="level"):
        sim.inject_fault("default", "cd-uce", level="Catastrophic")
    with pytest.raises(FaultSpecError, match="recovers"):
        sim.inject_fault("default", "cd-uce", recovers="yes")  # type: ignore[arg-type]


def test_unknown_rank_names_the_job(sim, kube) -> None:
    # A job of its own: under xdist the test that creates cd-uce may run in another process.
    create_job(kube, make_job("cd-two-pods"), running=False)
    with pytest.raises(UnknownJobError, match="no pod rank 7"):
        sim.inject_fault("default", "cd-two-pods", rank=7)


def test_backoff_limit_is_the_one_read_at_creation(sim, kube) -> None:
    """The operator keeps ``backoffLimit`` from its create handler
    (component/ascend-operator/pkg/controllers/v1/ascendjob_controller.go:374-376) and checks pod
    versions against that record (job.go:79-80): raising it on the running job changes nothing."""
    job = create_job(kube, make_job("cd-budget-late", strategies=None, backoff_limit=1))
    kube.custom.patch_namespaced_custom_object(
        "mindxdl.gitee.com",
        "v1",
        "default",
        "ascendjobs",
        "cd-budget-late",
        {"spec": {"runPolicy": {"backoffLimit": 100}}},
    )
    sim.inject_fault("default", "cd-budget-late", rank=1, fault_type="node")
    # The first recovery ends before the second fault: one that arrived during it would be merged into
    # it (one reschedule, one unit of budget), and the job would live on the budget of 1.
    assert sim.wait_idle(20)
    sim.inject_fault("default", "cd-budget-late", rank=1, fault_type="node")
    assert sim.wait_idle(20)
    job = kube.get_job("default", "cd-budget-late")
    assert job["spec"]["runPolicy"]["backoffLimit"] == 100
    assert job["status"]["conditions"][-1]["type"] == "Failed"
    assert "budget" in job["status"]["conditions"][-1]["message"]


def test_a_fault_during_a_recovery_is_reported_at_once_and_merged(sim, kube) -> None:
    # fault_recover_service.go:165 merges it into the running controller's cache (controller.go:204-219);
    # its FaultOccurEvent is dropped outside InitState (controller.go:474-479, rules.go:148), and
    # getAdditionFault (fault_recover_service.go:233-258) does not raise it again: one recovery, not two.
    job = create_job(kube, make_job("cd-merge", workers=2))
    before = len(sim._clusterd().history)
    with clock_speed(
        sim, 20
    ):  # the first recovery (retry fails → … → rescheduling) outlasts the second fault
        first = sim.inject_fault("default", "cd-merge", rank=1, fault_type="normal", recovers=[False] * 6)
        wait_for(lambda: "StrategyChosen" in event_reasons(kube, job), 10, "the first recovery under way")
        second = sim.inject_fault("default", "cd-merge", rank=2, fault_type="uce", recovers=True)
        text = wait_for(
            lambda: (t := events_text(kube, job)) and f"[{second}]" in t and t, 2, "second fault shown"
        )
    assert f"[{first}]" in text and "FaultMerged" in event_reasons(kube, job)
    assert sim.wait_idle(20)
    assert len(sim._clusterd().history) == before + 1
