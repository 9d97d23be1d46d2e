"""MindCluster's process-level recovery strategies: their names, order and first release."""

from __future__ import annotations

from typing import Final

# ClusterD's fixed priority (clusterd/pkg/domain/common/utils.go): lower runs first.
STRATEGY_PRIORITY: Final = {
    "retry": 1,
    "recover-in-place": 2,
    "recover": 3,
    "elastic-training": 4,
    "dump": 5,
    "exit": 6,
}
STRATEGIES: Final = tuple(sorted(STRATEGY_PRIORITY, key=STRATEGY_PRIORITY.__getitem__))
# The first release that knows each strategy (mindcluster.md §8).
STRATEGY_SINCE: Final = {
    "retry": "7.0",
    "recover": "7.0",
    "dump": "7.0",
    "exit": "7.0",
    "recover-in-place": "7.1",
    "elastic-training": "7.2",
}
# Strategies that need the MindIO/TaskD process-level machinery in the image and pods.
PROCESS_STRATEGIES: Final = frozenset(STRATEGY_PRIORITY)
# What ClusterD accepts in ProcessRecoverStrategy (mindcluster.md §6.4).
PLATFORM_STRATEGIES: Final = ("retry", "recover", "dump", "exit")


def sort_strategies(names: list[str] | tuple[str, ...] | set[str] | frozenset[str]) -> tuple[str, ...]:
    """Known strategy names de-duplicated and in ClusterD priority order."""
    return tuple(sorted(set(names), key=STRATEGY_PRIORITY.__getitem__))
