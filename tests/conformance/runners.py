"""Two runners for the conformance table: the what-if simulator, and the built-in cluster for real.

Both return an ``Outcome``: strategies chosen, ProcessRecoverStatus values written, codes, Init code
and what rescheduled the job. The built-in runner only reads what the simulated cluster wrote
(Events, the PodGroup, ClusterD's Init record); the only things it scripts are the agent's answers
(MindIO is closed source) and the platform's answer.
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from typing import Any

from apps.decisions import whatif
from mindcluster import clusterd as engine
from mindcluster import keys as k
from simcluster.injector import FaultSpec
from simcluster.kube import Kube
from simcluster.operator import build_podgroup
from simcluster.runtime import SimCluster
from tests.conformance.scenarios import Outcome, Scenario
from tests.support import wait_for
from tests.support.sim import create_job, make_job, podgroup_of

NPUS: int = 8
_STATUS = re.compile(r"\(([a-z]+-(?:success|failed|completed))")
_CODE = re.compile(r"code (\d+)")


def _job_manifest(scenario: Scenario, name: str, namespace: str) -> dict[str, Any]:
    labels = {"fault-scheduling": scenario.fault_scheduling, **scenario.labels}
    annotations = dict(scenario.annotations)
    if scenario.platform_mode:
        # The standing answer the platform keeps from the moment the job exists.
        annotations[k.ANNOTATION_PLATFORM_STRATEGY] = scenario.platform or ""
    return make_job(
        name,
        namespace=namespace,
        framework=scenario.framework,
        strategies=scenario.strategies,
        release=scenario.release,
        labels=labels,
        annotations=annotations,
    )


# --- (a) the what-if simulator ---------------------------------------------------------------------
def run_whatif(scenario: Scenario) -> Outcome:
    """What-if from the config ClusterD snapshots at Init: the PodGroup the operator creates."""
    manifest = _job_manifest(scenario, "whatif", "default")
    manifest["metadata"]["uid"] = "whatif-uid"
    podgroup = build_podgroup(manifest)["metadata"]
    policy = engine.RecoveryPolicy.from_podgroup(podgroup["labels"], podgroup["annotations"])
    # The PodGroup as ClusterD reads it live at the fault (the scenario's changes applied).
    labels_now, annotations_now = dict(podgroup["labels"]), dict(podgroup["annotations"])
    for key, value in scenario.live.get("labels", {}).items():
        _set(labels_now, key, value)
    for key, value in scenario.live.get("annotations", {}).items():
        _set(annotations_now, key, value)
    if not policy.init_accepted:
        # A refused Init is retried every second and not recorded (D6): the first accepted Init
        # snapshots the PodGroup as it is then.
        policy = engine.RecoveryPolicy.from_podgroup(labels_now, annotations_now)
    if not scenario.faults:
        code = engine.CODE_OK if policy.init_accepted else engine.CODE_PROCESS_RECOVER_ENABLE_OFF
        return Outcome((), (), (), code, None)
    events = [scenario.faults, *([scenario.then] if scenario.then else [])]
    specs = [
        whatif.FaultSpec(
            fault_type=event[0].type,
            ranks=(event[0].pod * NPUS,),
            level=event[0].level or "",
            also=tuple((f.type, f.pod * NPUS, f.level or "") for f in event[1:]),
            platform_standing=scenario.platform,
            attempts=scenario.results,
            platform_answer=scenario.platform,
            rank_table_ready=scenario.rank_table == "true",
            stop_report=scenario.stop_complete,
            strategy_reported=scenario.strategy_report,
            scale_out=scenario.regrow,
        )
        for event in events
    ]
    rehearsal = whatif.simulate_snapshot(
        policy,
        whatif.Scenario(
            faults=specs,
            npus_per_pod=NPUS,
            pods=2,
            spare_resources=scenario.spare,
            supported=frozenset(scenario.agent),
            framework=scenario.framework,
            release=scenario.release,
            wait_reschedule_s=engine.parse_wait_reschedule_timeout(
                annotations_now.get(k.ANNOTATION_WAIT_RESCHEDULE_TIMEOUT)
            ),
            live_in_place=engine.live_in_place_allowed(labels_now, annotations_now),
        ),
    )
    results = rehearsal["faults"]
    steps = [s for result in results for s in result.get("steps", [])]
    coded = ("failed", "platform-timeout", "report-timeout", "process-not-ready")
    codes = tuple(s["code"] for s in steps if s["code"] and s["kind"] in coded)
    rescheduled = None
    for result in results:
        outcome = result.get("outcome")
        rescheduled = {"job-rescheduled": "job", "pod-rescheduled": "pod", "job-failed": "failed"}.get(
            outcome or "", rescheduled
        )
    restart = results[0].get("restart_fault_process")
    return _checked(
        scenario,
        Outcome(
            tuple(s for result in results for s in result.get("strategies", [])),
            tuple(s["recover_status"] for s in steps if s["recover_status"]),
            codes,
            engine.CODE_OK if policy.init_accepted else engine.CODE_PROCESS_RECOVER_ENABLE_OFF,
            rescheduled,
            "none" if restart is None else "true" if restart else "false",
        ),
    )


def _checked(scenario: Scenario, observed: Outcome) -> Outcome:
    """The observation, without what the scenario does not check (RestartFaultProcess)."""
    if scenario.expected.restart_fault_process is None:
        return replace(observed, restart_fault_process=None)
    return observed


def _set(target: dict[str, str], key: str, value: str | None) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value


# --- (b) the built-in cluster ----------------------------------------------------------------------
class _Platform(threading.Thread):
    """The platform: when ClusterD writes ProcessConfirmFault, answer with ProcessResultFault and the
    final strategy (the standing answer was on the job from its creation)."""

    def __init__(self, kube: Kube, job: dict[str, Any], answer: str) -> None:
        super().__init__(daemon=True)
        self.kube, self.job, self.answer = kube, job, answer
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.01):
            podgroup = podgroup_of(self.kube, self.job)
            annotations = (podgroup or {}).get("metadata", {}).get("annotations") or {}
            confirm = annotations.get(k.ANNOTATION_CONFIRM_FAULT)
            if confirm and annotations.get(k.ANNOTATION_RESULT_FAULT) != confirm:
                self.kube.patch_podgroup(
                    self.job["metadata"]["namespace"],
                    podgroup["metadata"]["name"],  # type: ignore[index]
                    {
                        "metadata": {
                            "annotations": {
                                k.ANNOTATION_RESULT_FAULT: confirm,
                                k.ANNOTATION_PLATFORM_STRATEGY: self.answer,
                            }
                        }
                    },
                )


def run_builtin(sim: SimCluster, kube: Kube, scenario: Scenario, namespace: str) -> Outcome:
    """Create the job through the emulator, let the operator and the agent's Init happen, change the
    live keys, inject the faults, and read what ClusterD wrote."""
    cd = sim.clusterd
    assert cd is not None
    name = f"cf-{scenario.id}"[:50].rstrip("-.")
    manifest = _job_manifest(scenario, name, namespace)
    if scenario.rank_table is None:
        manifest["metadata"]["annotations"].pop(k.ANNOTATION_RANK_TABLE_READY, None)
    job = create_job(kube, manifest)
    uid = job["metadata"]["uid"]
    record = wait_for(lambda: cd.init_record(uid), what=f"{name}: Init")
    cd.taskd.script(
        uid,
        supported=scenario.agent,
        results=scenario.results,
        stop_report=scenario.stop_complete,
        strategy_reported=scenario.strategy_report,
    )
    cd.spare_resources = scenario.spare
    cd.regrow_after_scale_in = scenario.regrow
    if scenario.live:
        pg = podgroup_of(kube, job)
        assert pg is not None
        kube.patch_podgroup(namespace, pg["metadata"]["name"], {"metadata": dict(scenario.live)})
    platform = None
    if scenario.platform_mode and scenario.platform:
        platform = _Platform(kube, job, scenario.platform)
        platform.start()
    try:
        if scenario.faults:
            specs = [
                FaultSpec(
                    namespace=namespace, job=name, rank=f.pod, kind=f.type, level=f.level, recovers=True
                )
                for f in scenario.faults
            ]
            cd.inject(*specs)
            assert sim.wait_idle(30), f"{name}: ClusterD still busy"
        if scenario.then:
            # A second event once the first is over (e.g. while the job runs scaled in).
            cd.inject(
                *(
                    FaultSpec(
                        namespace=namespace, job=name, rank=f.pod, kind=f.type, level=f.level, recovers=True
                    )
                    for f in scenario.then
                )
            )
            assert sim.wait_idle(30), f"{name}: ClusterD still busy after the second event"
    finally:
        if platform is not None:
            platform.stop.set()
            platform.join(2)
        cd.spare_resources = True
        cd.regrow_after_scale_in = False
    events = sorted(
        kube.list_events(namespace, name), key=lambda e: int(e["metadata"].get("resourceVersion", 0))
    )
    strategies: list[str] = []
    statuses: list[str] = []
    codes: list[int] = []
    rescheduled = None
    restart: str | None = None
    for event in events:
        reason, message = event["reason"], event.get("message", "")
        if reason == "GlobalFault" and restart is None:
            restart = (
                "none"
                if message.startswith("no fault list")
                else "true"
                if "RestartFaultProcess=true" in message
                else "false"
            )
        elif reason == "StrategyChosen":
            strategies.append(message.split(":", 1)[0])
        elif reason in ("RecoverSucceeded", "RecoverFailed", "ProcessExited"):
            statuses.extend(_STATUS.findall(message.split(";", 1)[0]))
            if reason == "RecoverFailed":
                codes.extend(int(c) for c in _CODE.findall(message))
        elif reason == "ReportTimeout":
            codes.append(engine.CODE_WAIT_REPORT_TIMEOUT)
        elif reason == "ProcessNotReady":
            codes.append(engine.CODE_PROCESS_NOT_READY)
        elif reason == "WaitPlatStrategyTimeout":
            codes.append(engine.WAIT_PLATFORM_STRATEGY_TIMEOUT_CODE)
        elif reason in ("JobRescheduled", "PodRescheduled", "JobFailed"):
            rescheduled = {"JobRescheduled": "job", "PodRescheduled": "pod", "JobFailed": "failed"}[reason]
    final = (
        (podgroup_of(kube, job) or {})
        .get("metadata", {})
        .get("annotations", {})
        .get(k.ANNOTATION_RECOVER_STATUS)
    )
    assert final == (statuses[-1] if statuses else None), (
        f"{name}: PodGroup says {final!r}, Events {statuses}"
    )
    # Read before the job goes: deleting it deletes its PodGroup, and ClusterD drops the job's Init
    # record with it (the built-in one as the watch event arrives); read after, on a loaded machine
    # the record was already gone and the first, refused Init was reported instead of the retried one.
    final_init = cd.init_record(uid) or record  # a refused Init is retried (D6)
    kube.custom.delete_namespaced_custom_object(
        k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, namespace, k.ASCENDJOB_PLURAL, name
    )
    return _checked(
        scenario,
        Outcome(
            tuple(strategies), tuple(statuses), tuple(codes), final_init.code, rescheduled, restart or "none"
        ),
    )
