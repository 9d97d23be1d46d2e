"""How pytest-xdist hands tests to the test processes (issue #22: the suite in 10 minutes on 2 cores).

xdist's ``load`` scheduler first sends each process a quarter of its share as one consecutive block,
then more blocks. With the slowest tests sorted first (tests/conftest.py), the first process got
every slow test and the others ran out of work long before it finished: most of a run's wall time
was one process waiting on its simulated cluster while two sat idle.

Here every process takes one test at a time, the next slowest, whenever it is free (longest
processing time first, close to the best order there is when the durations are known). A module
listed in ``WHOLE_MODULES`` goes whole to the process that takes its first test: its module-scoped
fixture (an install, a cluster of its own, a live server) is too expensive to build once per process.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScheduling

# Modules whose module-scoped setup costs more than their tests: keep each in one process.
WHOLE_MODULES = frozenset(
    {
        "tests/ship/test_deploy_rehearsal.py",  # installs deploy/ into a cluster of its own (30-90 s)
        "tests/decisions/test_whatif_agrees_with_simulator.py",  # a cluster of its own, seeded
        "tests/ingest/test_fault_storm.py",  # one storm, several assertions on it
        "tests/decisions/test_platform_fifty_faults.py",  # one run of fifty faults, read by every test
        "tests/decisions/test_platform_after_exit.py",  # a cluster of its own per module
        "tests/ship/test_checkov.py",  # one checkov run for every file (its start-up is most of a run)
    }
)


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class SlowestFirstScheduling(LoadScheduling):
    """``load`` with ``--maxschedchunk 1`` semantics, and whole modules for ``WHOLE_MODULES``."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        # One at a time after the first two (LoadScheduling reads this in check_schedule).
        self.maxschedchunk = 1

    def schedule(self) -> None:
        """The first hand-out: process k gets the k-th and the (n+k)-th slowest tests (xdist's gives
        process 0 the two slowest). A process needs two tests to start one: it runs a test only once it
        knows the next."""
        if self.collection is None and self._check_nodes_have_same_collection():
            self.collection = next(iter(self.node2collection.values()))
            self.pending[:] = range(len(self.collection))
            if len(self.pending) >= 2 * len(self.nodes):
                for _ in range(2):
                    for node in self.nodes:
                        self._send_tests(node, 1)
                if not self.pending:
                    for node in self.nodes:
                        node.shutdown()
                return
        super().schedule()

    def _send_tests(self, node: Any, num: int) -> None:
        assert self.collection is not None
        chosen: list[int] = []
        while self.pending and len(chosen) < num:
            index = self.pending.pop(0)
            chosen.append(index)
            module = module_of(self.collection[index])
            if module in WHOLE_MODULES:
                rest = [i for i in self.pending if module_of(self.collection[i]) == module]
                taken = set(rest)
                self.pending[:] = [i for i in self.pending if i not in taken]
                chosen.extend(rest)
        if chosen:
            self.node2pending[node].extend(chosen)
            node.send_runtest_some(chosen)
