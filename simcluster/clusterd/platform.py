"""The simulated ClusterD's platform-mode handshake, in the order of the real one.

Read from ``Ascend/mind-cluster`` at 22bb3d98 (``component/clusterd/pkg/application/recover/``):

1. ``controller.go:664-676`` (``handleNotifyWaitFaultFlushing``): at a fault, before it stops training
   or writes anything, ClusterD waits (``WaitPlatFormStrategyReady``,
   ``fault_recover_platform_plugin.go:43-57``; 3 s poll, 300 s limit, ``const.go:159-161``) until
   ``ProcessRecoverStrategy`` is retry, recover or
   dump after trimming spaces and commas (``fault_recover_platform_plugin.go:30-39``); ``exit`` and ""
   do not count. Timeout → ``WaitPlatStrategyTimeout`` (code 508, ``code.go:75``) and the fault-retry
   way (``rules.go:153-154``).
2. ``controller.go:815-822`` (called at :890 and :938, inside ``handleNotifyGlobalFault``, before the
   globalFault signal) → ``UpdateProcessConfirmFault`` (``fault_recover_platform_plugin.go:60-83``):
   write ``ProcessConfirmFault`` = every fault rank as ``rank:type``, duplicates removed; refuse at once
   when the previous value was not cleared (":70-72").
3. ``controller.go:824-837`` → ``WaitProcessResultFault`` (":108-122"): wait for the key
   ``ProcessResultFault`` to exist, take the union of result and confirm ranks, then re-read
   ``ProcessRecoverStrategy`` with ``exit`` accepted (``platFormStrategy(..., true)``, ":36-38").
   Any failure of 2 or 3 → code 509 (``code.go:77``) and the fault-retry way
   (``controller.go:890-895``, ``rules.go:184-185``).
4. ``controller.go:1219-1232``: when the chosen strategy is ``recover``, ``WaitRankTableReady``
   (":141-159"): exactly ``true`` passes; absent or "" waits up to 300 s; any other value fails at once.
   On failure ClusterD re-reads the answer and falls back (``chooseForRecoverFail``: dump, else exit).
5. ``ProcessRecoverStatus`` is written by the controller as each attempt ends (``controller.go:1400-1413``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from mindcluster import keys as k

POLL_S: Final = 3.0  # constant.CheckPeriod
TIMEOUT_S: Final = 300.0  # constant.ProcessControlTimeout
STANDING_ACCEPTED: Final = ("retry", "recover", "dump")  # step 1 (confirmState=false)
CONFIRMED_ACCEPTED: Final = (*STANDING_ACCEPTED, "exit")  # step 3 and later (confirmState=true)
CODE_WAIT_PLAT_STRATEGY_TIMEOUT: Final = 508
CODE_CONFIRM_OR_RESULT_FAULT: Final = 509
UCE_TYPE: Final = "0"  # constant.UceFaultType
NORMAL_TYPE: Final = "1"  # constant.NormalFaultType
HCCL_TYPE: Final = "2"  # constant.HcclFaultType


class PlatformSide(Protocol):
    """What the handshake needs from one fault run: the PodGroup, events and simulated time."""

    def podgroup(self) -> dict[str, Any] | None: ...

    def patch_podgroup(
        self, labels: Mapping[str, str] | None = None, annotations: Mapping[str, str | None] | None = None
    ) -> None: ...

    def event(self, reason: str, message: str, warning: bool = False) -> None: ...

    def sleep(self, sim_seconds: float) -> None: ...

    def now(self) -> float: ...

    def stopped(self) -> bool: ...


# --- pure helpers ---------------------------------------------------------------------------------
def read_strategy(annotations: Mapping[str, str], *, confirmed: bool) -> str | None:
    """``platFormStrategy``: the accepted answer, or None (absent key, "", exit before confirming, junk)."""
    if k.ANNOTATION_PLATFORM_STRATEGY not in annotations:
        return None
    value = str(annotations[k.ANNOTATION_PLATFORM_STRATEGY]).strip().strip(",")
    return value if value in (CONFIRMED_ACCEPTED if confirmed else STANDING_ACCEPTED) else None


def dedupe_faults(faults: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """``RemoveSliceDuplicateFaults`` (``pkg/domain/common/utils.go:310-329``).

    One entry per rank; a later entry replaces the kept type only while that type is UCE or HCCL, so
    a normal fault wins over a retry-type one. Go returns map order; ranks are sorted here.
    """
    kept: dict[str, str] = {}
    for rank, kind in faults:
        if rank not in kept or kept[rank] in (UCE_TYPE, HCCL_TYPE):
            kept[rank] = kind
    return sorted(kept.items(), key=lambda item: (int(item[0]) if item[0].isdigit() else -1, item[0]))


def faults_to_string(faults: Iterable[tuple[str, str]]) -> str:
    """``Faults2String`` then ``strings.Trim(..., ",")``: ``rank:type`` joined by commas, never cut."""
    return ",".join(f"{rank}:{kind}" for rank, kind in faults).strip(",")


def string_to_faults(value: str) -> list[tuple[str, str]]:
    """``String2Faults`` (``utils.go:70-91``): entries that are not exactly ``a:b`` are skipped."""
    value = value.strip().strip(",")
    if not value:
        return []
    out: list[tuple[str, str]] = []
    for item in value.split(","):
        parts = item.split(":")
        if len(parts) == 2:
            out.append((parts[0], parts[1]))
    return out


def fault_type_digit(fault_type: str) -> str:
    """The wire digit of a fault type: the engine's digits pass through, names are mapped."""
    if fault_type in (UCE_TYPE, NORMAL_TYPE, HCCL_TYPE):
        return fault_type
    return {"uce": UCE_TYPE, "hccl": HCCL_TYPE}.get(fault_type, NORMAL_TYPE)


# --- the handshake ----------------------------------------------------------------------------------
@dataclass
class Handshake:
    """One fault's platform handshake; call the steps in order, read ``choice`` / ``timed_out``."""

    side: PlatformSide
    poll_s: float = POLL_S
    timeout_s: float = TIMEOUT_S
    standing: str | None = None  # the answer ClusterD found at step 1
    choice: str | None = None  # the answer it re-read at step 3 (or 4)
    ranks: list[tuple[str, str]] = field(default_factory=list)  # confirm + result ranks after step 3
    code: int = 0  # 508 / 509 when ClusterD went the fault-retry way
    refused_not_cleared: bool = False

    @property
    def timed_out(self) -> bool:
        """True when ClusterD left the handshake for fault-retry (the engine's 508 path)."""
        return self.code != 0

    def _annotations(self) -> dict[str, str]:
        return dict(((self.side.podgroup() or {}).get("metadata") or {}).get("annotations") or {})

    def _poll(self, check: Any) -> Any:
        """Go's wait loop: check; then sleep, stop once more than the limit has passed, check again."""
        started = self.side.now()
        value = check()
        while value is None and not self.side.stopped():
            self.side.sleep(self.poll_s)
            if self.side.now() - started > self.timeout_s:
                break
            value = check()
        return value

    # step 1
    def wait_standing(self) -> bool:
        """Wait for a standing retry/recover/dump answer; False (508) after 300 s."""
        self.standing = self._poll(lambda: read_strategy(self._annotations(), confirmed=False))
        if self.standing is not None:
            return True
        value = self._annotations().get(k.ANNOTATION_PLATFORM_STRATEGY)
        self.code = CODE_WAIT_PLAT_STRATEGY_TIMEOUT
        self.side.event(
            "WaitPlatStrategyTimeout",
            f"ProcessRecoverStrategy was {value!r}, not retry/recover/dump, for {int(self.timeout_s)} s "
            f"(code {CODE_WAIT_PLAT_STRATEGY_TIMEOUT}): fault retry",
            warning=True,
        )
        return False

    # steps 2 and 3
    def confirm(self, faults: Iterable[tuple[str, str]]) -> bool:
        """Write ProcessConfirmFault, wait for ProcessResultFault, re-read the answer; False → 509."""
        confirm = dedupe_faults(faults)
        previous = self._annotations().get(k.ANNOTATION_CONFIRM_FAULT, "")
        if previous:
            self.refused_not_cleared = True
            return self._fail(
                "ConfirmFaultNotCleared",
                f"ProcessConfirmFault still holds {previous!r}: the platform did not clear the previous "
                "question (plat not clear pre confirm fault)",
            )
        text = faults_to_string(confirm)
        self.side.patch_podgroup(annotations={k.ANNOTATION_CONFIRM_FAULT: text})
        self.side.event(
            "WaitingForPlatform",
            f"ProcessConfirmFault={text}; waiting up to {int(self.timeout_s)} s for ProcessResultFault",
        )
        result = self._poll(self._result_and_confirm)
        if result is None:
            return self._fail(
                "WaitProcessResultFaultTimeout", f"no ProcessResultFault within {int(self.timeout_s)} s"
            )
        result_ranks, confirm_ranks = result
        union = dedupe_faults([*result_ranks, *confirm_ranks])  # WaitProcessResultFault
        self.ranks = dedupe_faults([*confirm, *union])  # writeConfirmFaultAndWaitPlatResultFault
        self.choice = read_strategy(self._annotations(), confirmed=True)
        if self.choice is None:
            value = self._annotations().get(k.ANNOTATION_PLATFORM_STRATEGY)
            return self._fail("PlatformStrategyInvalid", f"ProcessRecoverStrategy={value!r} after the result")
        self.side.event(
            "PlatformStrategy",
            f"platform chose {self.choice!r}; fault ranks {faults_to_string(self.ranks) or '-'}",
        )
        return True

    def _result_and_confirm(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]] | None:
        annotations = self._annotations()
        if k.ANNOTATION_RESULT_FAULT not in annotations:  # the key must exist; "" is an answer
            return None
        return (
            string_to_faults(annotations[k.ANNOTATION_RESULT_FAULT]),
            string_to_faults(annotations.get(k.ANNOTATION_CONFIRM_FAULT, "")),
        )

    def _fail(self, reason: str, message: str) -> bool:
        self.code = CODE_CONFIRM_OR_RESULT_FAULT
        self.side.event(reason, f"{message} (code {CODE_CONFIRM_OR_RESULT_FAULT}): fault retry", warning=True)
        return False

    # step 4
    def rank_table_ready(self) -> bool:
        """``WaitRankTableReady`` before a recover: exactly "true"; absent/"" waits; anything else fails."""
        started = self.side.now()
        ready = self._annotations().get(k.ANNOTATION_RANK_TABLE_READY, "")
        while ready != "true":
            if ready != "":
                return self._rank_table_failed(f"RankTableReady={ready!r}, not 'true'")
            if self.side.stopped():
                return False
            self.side.sleep(self.poll_s)
            if self.side.now() - started > self.timeout_s:
                return self._rank_table_failed(f"no RankTableReady=true within {int(self.timeout_s)} s")
            ready = self._annotations().get(k.ANNOTATION_RANK_TABLE_READY, "")
        return True

    def _rank_table_failed(self, why: str) -> bool:
        # ClusterD re-reads the answer (exit accepted) and falls back from recover (controller.go:1225-1231).
        self.choice = read_strategy(self._annotations(), confirmed=True) or self.choice
        self.side.event("WaitRankTableReadyFailed", f"{why}: recover is not used", warning=True)
        return False


def confirm_faults(faults: Iterable[Any], ranks_per_pod: int) -> list[tuple[str, str]]:
    """The ``rank:type`` entries of one fault event: a whole-node fault names every rank of its pod."""
    out: list[tuple[str, str]] = []
    for fault in faults:
        kind = fault_type_digit(fault.fault_type)
        if fault.node_fault:
            first = fault.pod_rank * ranks_per_pod
            out.extend((str(rank), NORMAL_TYPE) for rank in range(first, first + ranks_per_pod))
        else:
            out.append((str(fault.rank), kind))
    return out


@dataclass
class RunSide:
    """Adapts one ``controller._FaultRun`` to ``PlatformSide`` (kept here so controller.py barely changes)."""

    run: Any

    def podgroup(self) -> dict[str, Any] | None:
        return self.run.podgroup()

    def patch_podgroup(
        self, labels: Mapping[str, str] | None = None, annotations: Mapping[str, str | None] | None = None
    ) -> None:
        self.run.patch_podgroup(labels=labels, annotations=annotations)

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        if reason == "ConfirmFaultNotCleared":
            with self.run.cd._lock:
                self.run.cd.confirm_refusals += 1
        self.run.event(reason, message, warning=warning)

    def sleep(self, sim_seconds: float) -> None:
        self.run.sleep(sim_seconds)

    def now(self) -> float:
        return self.run.clock.monotonic()

    def stopped(self) -> bool:
        return self.run.cd._stop.is_set()


def start(run: Any) -> Handshake:
    """A handshake for one fault run of the simulated ClusterD."""
    return Handshake(RunSide(run))
