"""Conformance rows for the second reading's D15 (the agent never reports): hand-written from the Go
source (``Ascend/mind-cluster`` at 22bb3d98, same at v7.2.RC1, v7.3.0, v26.0.0, v26.1.0).

Every wait of ClusterD for an agent report gives up after ``reportTimeoutMinutes = 15``
(controller.go:36) with ReportTimeoutEvent, code ``WaitReportTimeout`` 507 (code.go:72-73), and writes
no ProcessRecoverStatus (only handleCheckRecoverResult does, controller.go:1400-1413). Where it goes
next is in rules.go: a retry result's timeout straight to FaultRetry (:211-212); a recover, in-place,
dump or scale-in result's to FaultClear (:218-219, :225-226, :305-306), then FaultRetry (:259-260);
the scale-in isolate-ranks report's back to the strategy choice (:293-294). ``NO_REPORT`` is the
scripted agent's silence; the simulated clock runs the 15 minutes.
"""

from __future__ import annotations

from typing import Final

from mindcluster.clusterd import NO_REPORT
from tests.conformance.scenarios import BUSINESS, NORMAL, UCE, Fault, Outcome, Scenario, _s

R: Final = "component/clusterd/pkg/application/recover/"
CTL: Final = R + "controller.go"
RULES: Final = R + "rules.go"
CODE: Final = "component/clusterd/pkg/domain/common/code.go"
S_TIMEOUT: Final = (f"{CTL}:36", f"{CODE}:72-73")  # 15 minutes, code 507
S_RETRY_WAIT: Final = f"{CTL}:1728-1750"
S_RECOVER_WAIT: Final = f"{CTL}:1752-1797"
S_REPORT_WAIT: Final = f"{CTL}:1945-1967"
S_CLEAR_THEN_RETRY: Final = f"{RULES}:259-260"
TIMED_OUT: Final = 507


def _silent(
    id: str, src: tuple[str, ...], strategies: str, fault: Fault, chosen: str, **kw: object
) -> Scenario:
    """A row whose agent never reports its first attempt's result (unless ``results`` says more):
    ``chosen`` is the comma list of strategies ClusterD picks; ``rescheduled`` defaults to job."""
    statuses = tuple(str(s) for s in kw.pop("statuses", ()))  # type: ignore[attr-defined]
    rescheduled = str(kw.pop("rescheduled", "job"))
    outcome = Outcome(tuple(chosen.split(",")), statuses, (TIMED_OUT,), rescheduled=rescheduled)
    row = {"results": (NO_REPORT,), **kw}
    return _s(id=id, src=(*S_TIMEOUT, *src), strategies=strategies, faults=(fault,), expected=outcome, **row)


RETRY_TO_FAULT_RETRY: Final = (S_RETRY_WAIT, f"{RULES}:211-212")
RECOVER_TO_CLEAR: Final = (S_RECOVER_WAIT, f"{RULES}:218-219", S_CLEAR_THEN_RETRY)
DUMP_TO_CLEAR: Final = (S_REPORT_WAIT, f"{RULES}:225-226", S_CLEAR_THEN_RETRY)
NOTHING_RESTARTS: Final = (f"{RULES}:211-212", f"{RULES}:264-271")
POD_LEVEL: Final = (f"{RULES}:218-219", f"{CTL}:1534-1566")
ISOLATE_TO_CHOICE: Final = (S_REPORT_WAIT, f"{RULES}:293-294", f"{CTL}:1153-1158")
SCALE_IN_TO_CLEAR: Final = (f"{CTL}:1468-1493", f"{RULES}:305-306")
OFF: Final = "off"
POD_ON: Final = {"pod-rescheduling": "on"}

# fmt: off
D15: Final[list[Scenario]] = [
    _silent("report-timeout-retry-result", RETRY_TO_FAULT_RETRY, "retry,recover,dump", UCE, "retry"),
    _silent("report-timeout-recover-result", RECOVER_TO_CLEAR, "recover,dump", NORMAL, "recover"),
    _silent("report-timeout-in-place-result", RECOVER_TO_CLEAR, "recover-in-place,recover", BUSINESS,
            "recover-in-place"),
    _silent("report-timeout-recover-pod-rescheduling", POD_LEVEL, "recover", NORMAL, "recover",
            labels=POD_ON, fault_scheduling=OFF, rescheduled="pod"),
    _silent("report-timeout-dump-result", DUMP_TO_CLEAR, "dump", NORMAL, "dump"),
    _silent("report-timeout-retry-then-nothing-reschedules", NOTHING_RESTARTS, "retry,recover", UCE, "retry",
            fault_scheduling=OFF, rescheduled="failed"),
    # No isolate-ranks report: back to the choice, so the next strategy (dump) runs (rules.go:293-294).
    _silent("report-timeout-scale-in-isolate-ranks", ISOLATE_TO_CHOICE, "elastic-training,dump", NORMAL,
            "elastic-training,dump", statuses=("dump-success",), results=(NO_REPORT, True),
            fault_scheduling=OFF, rescheduled="failed"),
    _silent("report-timeout-scale-in-result-after-201", SCALE_IN_TO_CLEAR, "elastic-training,dump", NORMAL,
            "elastic-training", results=(201, NO_REPORT), fault_scheduling=OFF, labels=POD_ON, spare=False,
            rescheduled="pod"),
]
# fmt: on

SCENARIOS: Final[list[Scenario]] = [*D15]
