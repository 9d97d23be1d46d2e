"""D12: ClusterD's writes of ``reset.json`` (``mindcluster.reset_json.set_new_task_info``), read from
setNewTaskInfo and WriteResetInfoToCM (Ascend/mind-cluster 22bb3d98,
component/clusterd/pkg/domain/common/utils.go:192-269; same at v7.2.RC1, v7.3.0, v26.0.0, v26.1.0),
and the check code the simulated ClusterD writes beside its document."""

from __future__ import annotations

import hashlib
import json

import pytest

from mindcluster import reset_json as rj
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support.sim import create_job, make_job, reset_json_writes

OLD = {
    "RankList": [rj.rank_entry(3, 1, rj.STATUS_UNRECOVERED, "isolate", "80E01801")],
    "UpdateTime": 1,
    "RetryTime": 2,
    "FaultFlushing": True,
    "GracefulExit": 1,
    "RestartFaultProcess": True,
}


def test_a_fault_write_is_a_fresh_document_with_the_ranks_only() -> None:
    # utils.go:238-268: a new TaskResetInfo; only RetryTime carries over; ranks as {RankId, Status fault}.
    doc = rj.set_new_task_info(OLD, rj.OP_FAULT, fault_ranks=[8, 9], restart_fault_process=True, now=1700)
    assert list(doc) == [
        "RankList",
        "UpdateTime",
        "RetryTime",
        "FaultFlushing",
        "GracefulExit",
        "RestartFaultProcess",
    ]  # cd/common/type.go:16-23, marshalled in struct order
    assert doc["RankList"] == [rj.clusterd_rank(8), rj.clusterd_rank(9)]
    assert doc["RankList"][0] == {
        "RankId": 8,
        "LogicId": 0,
        "Status": "fault",
        "Policy": "",
        "InitialPolicy": "",
        "ErrorCode": None,
        "ErrorCodeHex": "",
    }
    kept = (doc["UpdateTime"], doc["RetryTime"], doc["FaultFlushing"], doc["GracefulExit"])
    assert kept == (1700, 2, False, 0)
    assert doc["RestartFaultProcess"] is True


@pytest.mark.parametrize(
    ("operation", "retry", "flushing"),
    [
        (rj.OP_CLEAR, 2, False),  # ClearOperation: RankList emptied (utils.go:250-252)
        (rj.OP_FAULT_FLUSHING, 2, True),  # the only write that sets FaultFlushing (utils.go:242-246)
        (rj.OP_RESTART_ALL_PROCESS, 3, False),  # RetryTime + 1 (utils.go:247-249)
    ],
)
def test_the_other_operations_write_no_ranks(operation: str, retry: int, flushing: bool) -> None:
    doc = rj.set_new_task_info(OLD, operation, fault_ranks=[8], restart_fault_process=True, now=5)
    assert doc["RankList"] == [] and doc["RetryTime"] == retry and doc["FaultFlushing"] is flushing
    assert doc["RestartFaultProcess"] is False and doc["GracefulExit"] == 0


def test_a_hot_reset_rank_makes_every_write_fail() -> None:
    # utils.go:233-237 with HotResetPolicy "reset" and RestartPolicy "restart" (const.go:211-213).
    for policy in ("reset", "restart"):
        old = {**OLD, "RankList": [rj.rank_entry(3, 1, rj.STATUS_UNRECOVERED, policy, "")]}
        with pytest.raises(rj.ResetWriteRefused, match="hotReset=1"):
            rj.set_new_task_info(old, rj.OP_CLEAR, now=5)
    with pytest.raises(ValueError, match=r"unknown reset\.json operation"):
        rj.set_new_task_info(OLD, "reset", now=5)


def test_check_code_is_sha256_of_the_go_marshalled_document() -> None:
    # MakeDataHash (clusterd/pkg/common/util/util.go:49-71): sha256 hex of json.Marshal, compact.
    doc = rj.set_new_task_info({}, rj.OP_FAULT, fault_ranks=[1], now=7)
    text = rj.go_marshal(doc)
    assert text.startswith('{"RankList":[{"RankId":1,"LogicId":0,"Status":"fault"')
    assert rj.check_code(doc) == hashlib.sha256(text.encode()).hexdigest()
    assert rj.go_marshal({"a": "<&>"}) == '{"a":"\\u003c\\u0026\\u003e"}'
    data = rj.configmap_data(doc)
    assert json.loads(data[rj.DATA_KEY]) == doc and data[rj.CHECK_CODE_KEY] == rj.check_code(doc)


def test_the_simulated_clusterd_writes_the_check_code(sim: SimCluster, kube: Kube) -> None:
    # WriteResetInfoToCM writes checkCode = MakeDataHash(document) beside reset.json (utils.go:215-227).
    create_job(kube, make_job("rj-uce"))
    sim.inject_fault("default", "rj-uce", rank=1, fault_type="uce", recovers=True)
    assert sim.wait_idle(20)
    cm = kube.get_configmap("default", rj.configmap_name("rj-uce"))
    assert cm is not None
    doc = rj.parse_configmap_data(cm["data"])
    assert doc and cm["data"][rj.CHECK_CODE_KEY] == rj.check_code(doc)


def test_the_simulated_clusterd_writes_only_what_set_new_task_info_writes(
    sim: SimCluster, kube: Kube, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A normal fault recovered: FaultOccur → notifyFaultFlushing (controller.go:682-683), globalFault →
    # the fault list (controller.go:963-966), the end → reset()'s ClearOperation (controller.go:221-227).
    # Every document is setNewTaskInfo's (utils.go:231-269): ranks as Status "fault" with every other
    # field zero, no error code and no policy (the codes are in the fault.Fault stream only).
    create_job(kube, make_job("rj-writes"))
    docs = reset_json_writes(sim, monkeypatch, "rj-writes")
    sim.inject_fault("default", "rj-writes", rank=1, fault_type="normal", recovers=True)
    assert sim.wait_idle(20)
    assert docs, "no reset.json write"
    for doc in docs:
        assert list(doc) == list(rj.set_new_task_info({}, rj.OP_CLEAR, now=0))  # the struct's keys, in order
        assert doc["GracefulExit"] == 0
        for entry in doc["RankList"]:
            assert entry == rj.clusterd_rank(entry["RankId"])
    flushing = [i for i, d in enumerate(docs) if d["FaultFlushing"]]
    with_ranks = [i for i, d in enumerate(docs) if d["RankList"]]
    assert flushing and with_ranks and flushing[0] < with_ranks[0]
    assert all(not docs[i]["RankList"] for i in flushing)  # notifyFaultFlushing writes no ranks
    assert {e["RankId"] for i in with_ranks for e in docs[i]["RankList"]} <= set(range(0, 64))
    assert docs[-1]["RankList"] == [] and docs[-1]["FaultFlushing"] is False
