"""The conformance table of issue #25: the base table (``scenarios.py``) with the source-facts D1
correction applied, plus the harder paths a job meets when recovery does not go well.

D1 (``component/clusterd/pkg/application/recover/rules.go:202-203``, ``controller.go:1804-1807``): a chosen
``exit`` fires NotifyExitSuccessEvent → ``handleDecideExitStrategy``, which only returns
CheckResultFinishEvent; ``ExitCompleted`` is written only by ``handleCheckRecoverResult``
(``controller.go:1446-1449``) when an agent reports a result with strategy ``exit`` while ClusterD awaits
another result, which the normal flow never does. So no scenario's outcome may contain
``exit-completed``. The base table is left as it is (another change de-duplicates it); the
correction is applied here, by scenario id, so a scenario that disappears there is noticed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from tests.conformance.scenarios import SCENARIOS as BASE
from tests.conformance.scenarios import Scenario

D1_SRC: Final = (
    "component/clusterd/pkg/application/recover/rules.go:202-203",
    "component/clusterd/pkg/application/recover/controller.go:1804-1807",
)
EXIT_COMPLETED: Final = "exit-completed"

# The base scenarios whose expected statuses wrongly contain exit-completed (issue #25: 14 and more).
D1_CORRECTED: Final = frozenset(s.id for s in BASE if EXIT_COMPLETED in s.expected.statuses)


def _without_exit_completed(scenario: Scenario) -> Scenario:
    if scenario.id not in D1_CORRECTED:
        return scenario
    statuses = tuple(s for s in scenario.expected.statuses if s != EXIT_COMPLETED)
    return replace(
        scenario,
        expected=replace(scenario.expected, statuses=statuses),
        src=(*scenario.src, *(s for s in D1_SRC if s not in scenario.src)),
    )


HARD_PATHS: Final[list[Scenario]] = []

SCENARIOS: Final = [*(_without_exit_completed(s) for s in BASE), *HARD_PATHS]


def sources() -> list[str]:
    """Every cited source line range, once, sorted."""
    return sorted({src for scenario in SCENARIOS for src in scenario.src})
