"""The simulated ClusterD's platform handshake, step by step, against the real ClusterD's source.

Paths are in ``Ascend/mind-cluster`` at 22bb3d987bc0208c3eb7395e222b661276133c58, under
``component/clusterd/pkg/``. A PodGroup in memory and a fake clock stand in for the cluster here (so
every poll can be counted); the end-to-end tests in ``test_platform_real_order.py`` run the same
handshake against the simulated cluster over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from mindcluster import keys as k
from mindcluster.clusterd import RankFault
from simcluster.clusterd import platform
from simcluster.clusterd.platform import Handshake, dedupe_faults, read_strategy


class FakePodGroup:
    """PlatformSide over a dict, with simulated time that only moves when ClusterD sleeps."""

    def __init__(self, annotations: dict[str, str] | None = None) -> None:
        self.annotations: dict[str, str] = dict(annotations or {})
        self.t = 0.0
        self.reads = 0
        self.sleeps = 0
        self.writes: list[tuple[float, dict[str, str | None]]] = []
        self.events: list[tuple[str, str]] = []
        self.at: list[tuple[float, Callable[[dict[str, str]], None]]] = []  # platform actions at times

    def podgroup(self) -> dict[str, Any]:
        self.reads += 1
        return {"metadata": {"annotations": dict(self.annotations)}}

    def patch_podgroup(
        self, labels: Mapping[str, str] | None = None, annotations: Mapping[str, str | None] | None = None
    ) -> None:
        self.writes.append((self.t, dict(annotations or {})))
        for key, value in (annotations or {}).items():
            if value is None:
                self.annotations.pop(key, None)
            else:
                self.annotations[key] = value

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        self.events.append((reason, message))

    def sleep(self, sim_seconds: float) -> None:
        self.sleeps += 1
        self.t += sim_seconds
        for when, action in list(self.at):
            if when <= self.t:
                action(self.annotations)
                self.at.remove((when, action))

    def now(self) -> float:
        return self.t

    def stopped(self) -> bool:
        return False

    def reasons(self) -> list[str]:
        return [reason for reason, _ in self.events]


def handshake(annotations: dict[str, str] | None = None) -> tuple[Handshake, FakePodGroup]:
    side = FakePodGroup(annotations)
    return Handshake(side), side


# --- step 1: the standing answer -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "standing"),
    [
        ("retry", "retry"),
        ("recover", "recover"),
        ("dump", "dump"),
        (" recover, ", "recover"),  # TrimSpace then Trim(","): fault_recover_platform_plugin.go:30-31
        (",dump,", "dump"),
        (",recover ,", None),  # the space is inside the commas: not trimmed
        ("exit", None),  # exit only once the fault is confirmed: plugin.go:36-38
        ("", None),
        ("recover,dump", None),
    ],
)
def test_step1_accepts_only_a_retry_recover_or_dump_answer(value: str, standing: str | None) -> None:
    # fault_recover_platform_plugin.go:19-40 (platFormStrategy with confirmState=false)
    assert read_strategy({k.ANNOTATION_PLATFORM_STRATEGY: value}, confirmed=False) == standing


def test_step1_an_absent_key_is_no_answer_and_exit_counts_once_confirmed() -> None:
    # plugin.go:25-29: the key must exist; plugin.go:36-38: exit accepted with confirmState=true
    assert read_strategy({}, confirmed=True) is None
    assert read_strategy({k.ANNOTATION_PLATFORM_STRATEGY: "exit"}, confirmed=True) == "exit"


def test_step1_a_standing_answer_passes_at_once_without_writing_or_sleeping() -> None:
    shake, side = handshake({k.ANNOTATION_PLATFORM_STRATEGY: "recover"})
    assert shake.wait_standing() is True
    assert shake.standing == "recover" and side.sleeps == 0 and side.writes == []


def test_step1_an_empty_answer_waits_300_s_in_3_s_polls_then_508_without_writing() -> None:
    # WaitPlatFormStrategyReady (plugin.go:43-57): check, then sleep 3 s (CheckPeriod, const.go:159),
    # stop once more than 300 s (ProcessControlTimeout, const.go:161) have passed; 508 (code.go:75)
    # is returned by handleNotifyWaitFaultFlushing (controller.go:664-673) before anything is written.
    shake, side = handshake({k.ANNOTATION_PLATFORM_STRATEGY: ""})
    assert shake.wait_standing() is False
    assert shake.code == 508 and shake.timed_out
    assert side.t == 303 and side.sleeps == 101  # checks at 0, 3, ..., 300; the 303 s wake-up gives up
    assert side.writes == []  # ProcessConfirmFault is never written without a standing answer
    assert side.reasons() == ["WaitPlatStrategyTimeout"]


def test_step1_an_answer_that_appears_later_is_picked_up_at_the_next_poll() -> None:
    shake, side = handshake({k.ANNOTATION_PLATFORM_STRATEGY: ""})
    side.at.append((7.0, lambda a: a.update({k.ANNOTATION_PLATFORM_STRATEGY: "dump"})))
    assert shake.wait_standing() is True
    assert shake.standing == "dump" and side.t == 9.0  # polls at 3, 6, 9


# --- steps 2 and 3: confirm, result, final answer -----------------------------------------------------
def test_step2_refuses_at_once_when_the_previous_question_was_not_cleared() -> None:
    # UpdateProcessConfirmFault (plugin.go:69-72) → 509 (controller.go:890-895, code.go:77)
    shake, side = handshake({k.ANNOTATION_PLATFORM_STRATEGY: "recover", k.ANNOTATION_CONFIRM_FAULT: "3:1"})
    assert shake.confirm([("8", "0")]) is False
    assert shake.code == 509 and shake.refused_not_cleared
    assert side.writes == [] and side.sleeps == 0
    assert side.annotations[k.ANNOTATION_CONFIRM_FAULT] == "3:1"


def test_step2_writes_every_rank_once_normal_winning_and_never_truncates() -> None:
    # RemoveSliceDuplicateFaults (domain/common/utils.go:310-329) + Faults2String (utils.go:46-55)
    many = [(str(rank), "1") for rank in range(4096)]
    shake, side = handshake({k.ANNOTATION_PLATFORM_STRATEGY: "recover"})
    side.at.append((3.0, lambda a: a.update({k.ANNOTATION_RESULT_FAULT: ""})))
    assert shake.confirm([("8", "0"), ("8", "1"), ("9", "0"), ("9", "0"), *many[10:]]) is True
    written = side.writes[0][1][k.ANNOTATION_CONFIRM_FAULT]
    assert written is not None
    assert written.startswith("8:1,9:0,10:1,") and written.endswith(",4095:1")
    assert len(written.split(",")) == 2 + 4086


def test_dedupe_keeps_the_first_type_unless_it_is_retry_type() -> None:
    # utils.go:314-320: a later entry replaces the kept one only when the kept one is UCE ("0") or HCCL ("2")
    assert dedupe_faults([("1", "1"), ("1", "0")]) == [("1", "1")]
    assert dedupe_faults([("1", "0"), ("1", "2")]) == [("1", "2")]
    assert dedupe_faults([("1", "2"), ("1", "1"), ("1", "0")]) == [("1", "1")]


def test_step3_waits_for_the_result_key_to_exist_then_rereads_the_answer_with_exit_allowed() -> None:
    # WaitProcessResultFault (plugin.go:95-99, 108-122): the key must exist; "" is a valid result.
    # writeConfirmFaultAndWaitPlatResultFault (controller.go:829-837): union, then platFormStrategy(true).
    shake, side = handshake({k.ANNOTATION_PLATFORM_STRATEGY: "recover"})

    def answer(a: dict[str, str]) -> None:
        a.update({k.ANNOTATION_RESULT_FAULT: "8:0,16:1", k.ANNOTATION_PLATFORM_STRATEGY: "exit"})

    side.at.append((6.0, answer))
    assert shake.wait_standing() and shake.confirm([("8", "0")]) is True
    assert side.t == 6.0
    assert shake.choice == "exit"  # the final answer may be exit
    assert shake.ranks == [("8", "0"), ("16", "1")]  # the platform added rank 16
    assert side.reasons() == ["WaitingForPlatform", "PlatformStrategy"]


def test_step3_no_result_within_300_s_is_509() -> None:
    shake, side = handshake({k.ANNOTATION_PLATFORM_STRATEGY: "recover"})
    assert shake.confirm([("8", "1")]) is False
    assert shake.code == 509 and side.t == 303
    assert side.reasons() == ["WaitingForPlatform", "WaitProcessResultFaultTimeout"]


def test_step3_an_emptied_answer_after_the_result_is_509() -> None:
    # controller.go:832-835: platFormStrategy(..., true) fails → error → 509
    shake, side = handshake({k.ANNOTATION_PLATFORM_STRATEGY: "recover"})
    side.at.append(
        (3.0, lambda a: a.update({k.ANNOTATION_RESULT_FAULT: "8:1", k.ANNOTATION_PLATFORM_STRATEGY: ""}))
    )
    assert shake.confirm([("8", "1")]) is False and shake.code == 509


# --- step 4: RankTableReady ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("start", "later", "ready", "elapsed"),
    [
        ("true", None, True, 0.0),  # plugin.go:144: exactly "true"
        (None, (6.0, "true"), True, 6.0),  # absent: wait (plugin.go:133-136 returns "", :148-156)
        ("", (3.0, "true"), True, 3.0),  # an empty value waits like an absent key
        ("false", None, False, 0.0),  # any other value fails at once (plugin.go:145-147)
        ("True", None, False, 0.0),
        (None, None, False, 303.0),  # never set: fails after 300 s (plugin.go:150-154)
    ],
)
def test_step4_rank_table_ready_must_be_exactly_true(
    start: str | None, later: tuple[float, str] | None, ready: bool, elapsed: float
) -> None:
    annotations = {k.ANNOTATION_PLATFORM_STRATEGY: "recover"}
    if start is not None:
        annotations[k.ANNOTATION_RANK_TABLE_READY] = start
    shake, side = handshake(annotations)
    if later:
        side.at.append((later[0], lambda a: a.update({k.ANNOTATION_RANK_TABLE_READY: later[1]})))
    assert shake.rank_table_ready() is ready
    assert side.t == elapsed
    if not ready:  # controller.go:1225-1231: the answer is re-read, then dump or exit
        assert side.reasons() == ["WaitRankTableReadyFailed"]


# --- the rank list of one fault event ------------------------------------------------------------
def test_confirm_faults_names_every_rank_of_a_faulty_node_and_keeps_types() -> None:
    uce = RankFault(rank=9, pod_rank=1, node="n1", fault_type="0")
    hccl = RankFault(rank=10, pod_rank=1, node="n1", fault_type="2")
    node = RankFault(rank=16, pod_rank=2, node="n2", fault_type="1", node_fault=True)
    assert platform.confirm_faults([uce, hccl], 8) == [("9", "0"), ("10", "2")]
    assert platform.confirm_faults([node], 4) == [("8", "1"), ("9", "1"), ("10", "1"), ("11", "1")]
