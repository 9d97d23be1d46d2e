"""Each source's pure mapping: what it sees → typed observations, with no repeats on replay."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from apps.cluster.timestamps import parse_k8s_time
from apps.clusterd.client import DeviceFault, FaultSignal, NodeFault
from apps.events import incidents, kinds
from apps.ingest import (
    ascendjobs,
    clusterd_faults,
    k8s_events,
    podgroups,
    reschedule_reason,
    reset_config,
)
from apps.ingest.observation import best_time, split_uid_suffix
from mindcluster import reset_json

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
UID = "0b8a1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"


def podgroup(rv: str, status: str = "", confirm: str = "", platform: bool = False) -> dict:
    annotations = {"recover-strategy": "retry,recover"}
    if status:
        annotations["ProcessRecoverStatus"] = status
    if confirm:
        annotations["ProcessConfirmFault"] = confirm
    if platform:
        annotations["ProcessRecoverStrategy"] = ""
    return {
        "metadata": {
            "name": f"llama-{UID}",
            "namespace": "team-a",
            "uid": "pg-uid",
            "resourceVersion": rv,
            "annotations": annotations,
            "labels": {"process-recover-enable": "on"},
        }
    }


@pytest.mark.parametrize(
    ("status", "kind", "strategy"),
    [
        ("retry-success", kinds.RECOVERY_SUCCEEDED, "retry"),
        ("recover-failed", kinds.RECOVERY_FAILED, "recover"),
        ("recover-in-place-success", kinds.RECOVERY_SUCCEEDED, "recover-in-place"),
        ("dump-success", kinds.DUMP_SAVED, "dump"),
        ("dump-failed", kinds.RECOVERY_FAILED, "dump"),
        ("exit-completed", kinds.TRAINING_EXITED, "exit"),
    ],
)
def test_podgroup_recover_status_table(status: str, kind: str, strategy: str) -> None:
    state, found = podgroups.podgroup_observations({}, podgroup("5", status), NOW)
    assert [(o.kind, o.data["strategy"]) for o in found] == [(kind, strategy)]
    assert found[0].job.name == "llama" and found[0].job.uid == UID
    assert found[0].dedupe_key == "pg:pg-uid:5:ProcessRecoverStatus"
    # Replaying the same state yields nothing; an unrelated change yields nothing either.
    assert podgroups.podgroup_observations(state, podgroup("6", status), NOW)[1] == []


def test_podgroup_confirm_fault_is_a_decision_request() -> None:
    _, found = podgroups.podgroup_observations({}, podgroup("7", confirm="3:0,11:1", platform=True), NOW)
    assert [o.kind for o in found] == [kinds.DECISION_REQUESTED]
    assert found[0].data == {"confirm_fault": "3:0,11:1"}


def reset_cm(rv: str, ranks: list[tuple[int, str, str]], flushing: bool) -> dict:
    doc = {
        "RankList": [
            {"RankId": str(r), "LogicId": "0", "Status": s, "Policy": "restart", "ErrorCodeHex": code}
            for r, s, code in ranks
        ],
        "FaultFlushing": flushing,
        "RestartType": "podReschedule",
    }
    return {
        "metadata": {
            "name": "reset-config-llama",
            "namespace": "team-a",
            "uid": "cm-uid",
            "resourceVersion": rv,
        },
        "data": {"reset.json": json.dumps(doc)},
    }


def test_reset_config_detects_new_unrecovered_ranks_and_training_stop() -> None:
    state, found = reset_config.reset_observations(
        {}, reset_cm("3", [(8, "unrecovered", "80e01801")], True), NOW
    )
    assert [o.kind for o in found] == [kinds.FAULT_DETECTED, kinds.TRAINING_STOPPED]
    assert found[0].data["ranks"] == [8] and found[0].data["code"] == "80E01801"
    assert found[0].job.name == "llama"
    # The same rank recovered, then faulty again: a new detection.
    state, found = reset_config.reset_observations(
        state, reset_cm("4", [(8, "recovered", "80E01801")], False), NOW
    )
    assert found == []
    _, found = reset_config.reset_observations(state, reset_cm("5", [(8, "unrecovered", "")], True), NOW)
    assert [o.kind for o in found] == [kinds.FAULT_DETECTED, kinds.TRAINING_STOPPED]


def _clusterd_cm(rv: str, doc: dict) -> dict:
    meta = {"name": "reset-config-llama", "namespace": "team-a", "uid": "cm-uid", "resourceVersion": rv}
    return {"metadata": meta, "data": reset_json.configmap_data(doc)}


def test_reset_config_reads_clusterd_s_own_writes() -> None:
    # ClusterD's sequence (setNewTaskInfo, component/clusterd/pkg/domain/common/utils.go:231-269; facts
    # D12): notifyFaultFlushing with no ranks (controller.go:682-683), then the fault list as Status
    # "fault" with no code or policy (controller.go:963-966), then ClearOperation (controller.go:221-227).
    flushing = reset_json.set_new_task_info({}, reset_json.OP_FAULT_FLUSHING, now=1)
    state, found = reset_config.reset_observations({}, _clusterd_cm("3", flushing), NOW)
    assert [o.kind for o in found] == [kinds.TRAINING_STOPPED] and found[0].data["ranks"] == []
    listed = reset_json.set_new_task_info(flushing, reset_json.OP_FAULT, fault_ranks=[8, 9], now=2)
    state, found = reset_config.reset_observations(state, _clusterd_cm("4", listed), NOW)
    assert [o.kind for o in found] == [kinds.FAULT_DETECTED]
    assert found[0].data == {"ranks": [8, 9], "device": "0", "code": "", "policy": ""}
    # The same list written again (a re-flush) is no new detection; after a clear the rank is new again.
    state, found = reset_config.reset_observations(state, _clusterd_cm("5", listed), NOW)
    assert found == []
    cleared = reset_json.set_new_task_info(listed, reset_json.OP_CLEAR, now=3)
    state, found = reset_config.reset_observations(state, _clusterd_cm("6", cleared), NOW)
    assert found == [] and state == {"ranks": {}, "flushing": False}
    _, found = reset_config.reset_observations(state, _clusterd_cm("7", listed), NOW)
    assert [o.kind for o in found] == [kinds.FAULT_DETECTED]


def test_reset_config_tolerates_garbage() -> None:
    cm = {"metadata": {"name": "reset-config-x", "namespace": "n"}, "data": {"reset.json": "{not json"}}
    assert reset_config.reset_observations({}, cm, NOW) == ({"ranks": {}, "flushing": False}, [])


def reschedule_cm(records: dict) -> dict:
    return {
        "metadata": {"name": "job-reschedule-reason", "namespace": "mindx-dl"},
        "data": {"recent-reschedule-records": json.dumps(records)},
    }


def test_reschedule_reason_emits_one_observation_per_new_record() -> None:
    key = f"team-a/llama-{UID}"
    record = {
        "RescheduleTimeStamp": int(NOW.timestamp()),
        "ReasonOfTask": [
            {
                "RescheduleReason": "CardUnhealthy",
                "PodName": "llama-worker-0",
                "NodeName": "node-3",
                "NodeRankIndex": "1",
            }
        ],
    }
    state, found = reschedule_reason.reschedule_observations(
        {}, reschedule_cm({key: {"TotalRescheduleTimes": 1, "RescheduleRecords": [record]}}), NOW
    )
    assert [(o.kind, o.data["reasons"], o.dedupe_key) for o in found] == [
        (kinds.POD_RESCHEDULED, ["CardUnhealthy"], f"rr:{key}:1")
    ]
    assert found[0].job.namespace == "team-a" and found[0].job.name == "llama" and found[0].job.uid == UID
    # Two more reschedules while we were away: both come out, oldest first, numbered 2 and 3.
    newer = [dict(record, RescheduleTimeStamp=record["RescheduleTimeStamp"] + i) for i in (2, 1)]
    _, found = reschedule_reason.reschedule_observations(
        state, reschedule_cm({key: {"TotalRescheduleTimes": 3, "RescheduleRecords": [*newer, record]}}), NOW
    )
    assert [o.data["number"] for o in found] == [2, 3]


def test_ascendjob_phase_changes_and_budget_limits() -> None:
    job = {
        "metadata": {
            "name": "llama",
            "namespace": "team-a",
            "uid": UID,
            "resourceVersion": "9",
            "labels": {"fault-retry-times": "3"},
        },
        "spec": {"runPolicy": {"backoffLimit": 5}},
        "status": {
            "conditions": [
                {"type": "Created", "status": "True"},
                {"type": "Running", "status": "False"},
                {"type": "Restarting", "status": "True", "reason": "jobRestarting", "message": "pod failed"},
            ]
        },
    }
    state, found = ascendjobs.ascendjob_observations({"phase": "Running"}, job, NOW)
    assert state == {"phase": "Restarting", "backoff_limit": 5, "fault_retry_times": 3}
    assert [(o.kind, o.data["phase"], o.data["previous"]) for o in found] == [
        (kinds.JOB_PHASE_CHANGED, "Restarting", "Running")
    ]
    assert ascendjobs.ascendjob_observations(state, job, NOW)[1] == []


def k8s_event(reason: str, message: str, type_: str = "Normal", count: int = 1) -> dict:
    return {
        "metadata": {"uid": "ev-1", "namespace": "team-a"},
        "involvedObject": {"kind": "AscendJob", "name": "llama", "namespace": "team-a", "uid": UID},
        "reason": reason,
        "message": message,
        "type": type_,
        "count": count,
        "lastTimestamp": "2026-11-29T11:00:00Z",
    }


@pytest.mark.parametrize(
    ("reason", "message", "type_", "kind", "data"),
    [
        (
            "FaultDetected",
            "uce fault (code 80E01801, level RestartBusiness) on pod rank 1 "
            "(process rank 8, node node-2) [f-7]",
            "Warning",
            kinds.FAULT_DETECTED,
            {
                "code": "80E01801",
                "level": "RestartBusiness",
                "ranks": [8],
                "node": "node-2",
                "fault_id": "f-7",
            },
        ),
        (
            "StrategyChosen",
            "recover: retry failed; next in priority",
            "Normal",
            kinds.STRATEGY_CHOSEN,
            {"strategy": "recover"},
        ),
        (
            "RecoverFailed",
            "retry failed (retry-failed)",
            "Warning",
            kinds.RECOVERY_FAILED,
            {"strategy": "retry"},
        ),
        (
            "InvalidFramework",
            "framework label missing",
            "Warning",
            kinds.JOB_WARNING,
            {"reason": "InvalidFramework"},
        ),
        ("JobRescheduled", "all pods recreated", "Normal", None, {}),
        ("SomethingNormal", "chatter", "Normal", None, {}),
    ],
)
def test_k8s_event_reason_table(reason: str, message: str, type_: str, kind: str | None, data: dict) -> None:
    found = k8s_events.event_observations(k8s_event(reason, message, type_), NOW)
    if kind is None:
        assert found == []
        return
    assert len(found) == 1 and found[0].kind == kind
    assert data.items() <= found[0].data.items()
    assert found[0].dedupe_key == "k8s-event:ev-1:1"
    assert found[0].occurred_at == datetime(2026, 11, 29, 11, 0, tzinfo=UTC)  # old: the source's own time


def test_events_about_other_objects_are_ignored() -> None:
    event = k8s_event("FaultDetected", "x")
    event["involvedObject"]["kind"] = "Pod"
    assert k8s_events.event_observations(event, NOW) == []


def signal(uuid: str, devices: list[tuple[str, str]], signal_type: str = "fault") -> FaultSignal:
    return FaultSignal(
        uuid=uuid,
        job_id=UID,
        signal_type=signal_type,
        nodes=(
            NodeFault(
                "node-2",
                "10.0.0.2",
                "SN",
                "SubHealthy",
                tuple(
                    DeviceFault(d, "NPU", (code,), "RestartBusiness", ("uce",), ("f-1",))
                    for d, code in devices
                ),
            ),
        )
        if devices
        else (),
    )


def test_clusterd_full_state_resend_repeats_nothing() -> None:
    state, found = clusterd_faults.fault_observations({}, signal("u1", [("0", "80e01801")]), NOW)
    assert [(o.kind, o.data["node"], o.data["device"], o.data["code"], o.data["level"]) for o in found] == [
        (kinds.FAULT_DETECTED, "node-2", "0", "80E01801", "RestartBusiness")
    ]
    # Reconnect: ClusterD sends the full state again with a new uuid → nothing new.
    state, found = clusterd_faults.fault_observations(state, signal("u2", [("0", "80e01801")]), NOW)
    assert found == []
    # A second device joins: only it is new.
    state, found = clusterd_faults.fault_observations(
        state, signal("u3", [("0", "80e01801"), ("3", "8C1F860B")]), NOW
    )
    assert [o.data["device"] for o in found] == ["3"]
    # Healthy again, then the first fault returns: detected again.
    state, _ = clusterd_faults.fault_observations(state, signal("u4", [], "normal"), NOW)
    _, found = clusterd_faults.fault_observations(state, signal("u5", [("0", "80e01801")]), NOW)
    assert len(found) == 1


def test_time_helpers() -> None:
    assert split_uid_suffix(f"llama-{UID}") == ("llama", UID)
    assert split_uid_suffix("plain-name") == ("plain-name", "")
    stamp = parse_k8s_time("2026-11-29T12:00:00Z")
    assert stamp == NOW
    assert best_time(stamp, NOW + timedelta(milliseconds=300)) == NOW + timedelta(milliseconds=300)  # live
    assert best_time(stamp, NOW + timedelta(minutes=5)) == NOW  # replayed: keep the source's time


def test_incident_fold_retry_then_recover() -> None:
    state = incidents.new_incident(NOW)
    steps = [
        (kinds.FAULT_DETECTED, {"code": "80E01801", "ranks": [8], "node": "node-2"}, 0),
        (kinds.TRAINING_STOPPED, {"ranks": [8]}, 100),
        (kinds.STRATEGY_CHOSEN, {"strategy": "retry"}, 400),
        (kinds.RECOVERY_FAILED, {"strategy": "retry"}, 900),
        (kinds.STRATEGY_CHANGED, {"strategy": "recover"}, 950),
        (kinds.RECOVERY_SUCCEEDED, {"strategy": "recover"}, 5000),
    ]
    changes: list[str] = []
    for kind, data, ms in steps:
        changes += incidents.apply(state, kind, data, NOW + timedelta(milliseconds=ms))
    assert changes == ["closed"]
    assert state["outcome"] == incidents.RECOVERED
    assert state["strategies"] == ["retry", "recover"]
    assert [a["outcome"] for a in state["attempts"]] == ["failed", "succeeded"]
    assert (state["detect_ms"], state["decide_ms"], state["recover_ms"]) == (100, 300, 4600)
    assert state["ranks"] == [8] and state["nodes"] == ["node-2"]


def test_incident_fold_dump_exit_reschedule() -> None:
    state = incidents.new_incident(NOW)
    for kind, data in [
        (kinds.FAULT_DETECTED, {"code": ""}),
        (kinds.STRATEGY_CHOSEN, {"strategy": "dump"}),
        (kinds.DUMP_SAVED, {"strategy": "dump"}),
        (kinds.TRAINING_EXITED, {}),
        (kinds.JOB_RESCHEDULED, {"reasons": ["pod-failed"], "nodes": ["node-1"]}),
    ]:
        incidents.apply(state, kind, data, NOW)
    assert state["outcome"] == incidents.RESCHEDULED
    assert state["strategies"] == ["dump", "job-rescheduling"]
    assert [a["outcome"] for a in state["attempts"]] == ["saved", "exited", "rescheduled"]


def test_fault_signature_is_the_code() -> None:
    assert incidents.fault_signature({"code": "80e01801", "ranks": [1]}) == "code:80E01801"
    assert (
        incidents.fault_signature({"ranks": [3, 1]}) == incidents.fault_signature({"node": "n1"}) == "code:"
    )
