"""Where the decider reads a fault's code and level: ClusterD's fault service, not reset.json.

ClusterD writes each fault rank into reset.json as Status ``fault`` with no error code and no policy
(``setNewTaskInfo``, Ascend/mind-cluster ``component/clusterd/pkg/domain/common/utils.go:231-269``,
``TaskDevInfo{RankId, DevFaultInfo{Status: FaultRankStatus}}`` at :256-263; source facts D12). The codes
and levels a platform can see are in ``fault.Fault`` (``DeviceFaultInfo{deviceId, faultCodes,
faultLevel, faultType}``, ``deviceId "-1"`` for the node itself; mindcluster.md §6.2), which the ingester
follows as a stream and the decider asks with ``GetFaultMsgSignal``.
"""

from __future__ import annotations

import pytest

from apps.clusterd.client import ClusterDError, DeviceFault, FaultSignal, NodeFault
from apps.decisions import services
from apps.jobs.models import Cluster, TrainingJob
from mindcluster import faults as vocab

pytestmark = pytest.mark.django_db


def _job(address: str) -> TrainingJob:
    cluster = Cluster.objects.create(name="c1", kubeconfig_path="/nonexistent", clusterd_address=address)
    return TrainingJob.objects.create(cluster=cluster, namespace="default", name="llama", uid="uid-1")


def _signal(*devices: DeviceFault, node_level: str = "") -> FaultSignal:
    node = NodeFault(node_name="n1", node_ip="10.0.0.1", node_sn="", level=node_level, devices=devices)
    return FaultSignal(uuid="u", job_id="uid-1", signal_type="fault", nodes=(node,))


def test_a_whole_node_fault_is_a_node_fault_at_its_level(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, str]] = []

    def get_faults(address: str, *, job_id: str = "", role: str = "") -> FaultSignal:
        asked.append((address, job_id))
        return _signal(DeviceFault("-1", "Node", (), vocab.SEPARATE_FAULT, ("node",), ()))

    monkeypatch.setattr(services.clusterd_client, "get_faults", get_faults)
    assert services._clusterd_facts(_job("cd:8899")) == ({"node"}, {vocab.SEPARATE_FAULT})
    assert asked == [("cd:8899", "uid-1")]  # the job is named by its uid (ClientInfo.jobId)


def test_a_chip_code_names_its_type_and_the_node_level_stands_in(monkeypatch: pytest.MonkeyPatch) -> None:
    device = DeviceFault("3", "NPU", (vocab.CODE_HBM_DOUBLE_BIT.lower(),), "", ("CardUnhealthy",), ())
    monkeypatch.setattr(
        services.clusterd_client, "get_faults", lambda *a, **k: _signal(device, node_level="X")
    )
    assert services._clusterd_facts(_job("cd:8899")) == ({"uce"}, {"X"})


def test_no_address_or_an_unreachable_clusterd_gives_no_detail(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: object, **kwargs: object) -> FaultSignal:
        raise ClusterDError("down")

    monkeypatch.setattr(services.clusterd_client, "get_faults", refused)
    monkeypatch.setattr(services, "DETAIL_RETRY_FOR_S", 0.3)  # asked again, then given up
    assert services._clusterd_facts(_job("")) == (set(), set())
    TrainingJob.objects.all().delete()
    Cluster.objects.all().delete()
    assert services._clusterd_facts(_job("cd:8899")) == (set(), set())


def test_a_query_refused_for_the_rate_limit_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """ClusterD answers 10 fault queries a second and refuses more with 429 (mindcluster.md §6.2;
    the client raises a retryable error): at 10 faults a second a node fault was decided as "normal"
    (recovered, not dumped) in 2 of 3 runs of tests/decisions/test_platform_fifty_faults.py."""
    answers: list[object] = [
        ClusterDError("GetFaultMsgSignal: 429 too many requests", permanent=False),
        ClusterDError("GetFaultMsgSignal: 429 too many requests", permanent=False),
        _signal(DeviceFault("-1", "Node", (), vocab.SEPARATE_FAULT, ("node",), ())),
    ]

    def get_faults(address: str, *, job_id: str = "", role: str = "") -> FaultSignal:
        answer = answers.pop(0)
        if isinstance(answer, ClusterDError):
            raise answer
        assert isinstance(answer, FaultSignal)
        return answer

    monkeypatch.setattr(services.clusterd_client, "get_faults", get_faults)
    assert services._clusterd_facts(_job("cd:8899")) == ({"node"}, {vocab.SEPARATE_FAULT})
    assert answers == []


def test_a_permanent_refusal_is_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def refused(address: str, *, job_id: str = "", role: str = "") -> FaultSignal:
        asked.append(job_id)
        raise ClusterDError("GetFaultMsgSignal: 400 bad request", permanent=True)

    monkeypatch.setattr(services.clusterd_client, "get_faults", refused)
    assert services._clusterd_facts(_job("cd:8899")) == (set(), set())
    assert asked == ["uid-1"]
