"""Plain-language, one-line explanations the form shows next to each choice (mindcluster.md §3.1).

Pure data: the dashboard is for people who have never read the MindCluster manual.
"""

from __future__ import annotations

from typing import Final

from apps.policies.spec import STRATEGIES, STRATEGY_SINCE

STRATEGY_TITLES: Final = {
    "retry": "Retry the step",
    "recover-in-place": "Restart faulty processes in place",
    "recover": "Move the faulty pod and rejoin",
    "elastic-training": "Shrink and keep training",
    "dump": "Save a last-moment checkpoint",
    "exit": "Stop and reschedule",
}

STRATEGY_EXPLANATIONS: Final = {
    "retry": "Repairs an on-chip memory (UCE) or network fault and re-runs the last step; nothing restarts.",
    "recover-in-place": "Restarts only the faulty processes on the same pod, then re-runs the current step.",
    "recover": "Moves the faulty pod to a healthy node; it rejoins and copies parameters from replicas.",
    "elastic-training": "PyTorch only: trains on without the faulty data-parallel group; grows back later.",
    "dump": "Saves a checkpoint from optimizer replicas at fault time, exits, and restarts from it.",
    "exit": "Stops training and lets Pod- or Job-level rescheduling restart it from the last checkpoint.",
}

FAULT_SCHEDULING_TEXT: Final = {
    "grace": "Delete faulty pods gracefully and reschedule (what process-level recovery needs from 7.2).",
    "force": "Delete faulty pods at once; not with hostNetwork pods.",
    "off": "No rescheduling by MindCluster; only Kubernetes' own retries.",
}

SUB_HEALTHY_TEXT: Final = {
    "ignore": "Keep training on a sub-healthy node.",
    "graceExit": "Save a dying-gasp checkpoint, then reschedule (needs the dump strategy).",
    "forceExit": "Reschedule at once, without a checkpoint.",
    "hotSwitch": "Start a backup pod, pause, and move training onto it.",
}

EFFECT_WHEN_TEXT: Final = {
    "recreate": "When the job is (re)created: read once by the operator and by ClusterD at the job's first "
    "Init; on a running job this waits for the job to be recreated",
    "live": "Read by ClusterD at every fault: in effect from the next fault once written",
    "pod-restart": "When pods are next created (rescheduling, restart or recreation)",
    "image-build": "At the next image build",
    "training-start": "At the next start of training",
}

# What a pending key waits for, in words (design.md §4.4).
WAITS_FOR_TEXT: Final = {
    "recreate": "waits for the job to be recreated",
    "pod-restart": "waits for its pods to be created again",
    "image-build": "waits for the next image build",
    "training-start": "waits for the next start of training",
    "nothing": "read at every fault: in effect",
}

BASIS_TEXT: Final = {
    "created-with": "the job was created with it",
    "admission": "merged in at admission, when the job was created",
    "observed": "observed on the job as it was created",
    "unknown": "not observed yet",
}


def strategy_choices() -> list[dict[str, str]]:
    """Strategies in ClusterD priority order with a title, a one-line explanation and the first release."""
    return [
        {
            "name": name,
            "title": STRATEGY_TITLES[name],
            "explain": STRATEGY_EXPLANATIONS[name],
            "since": STRATEGY_SINCE[name],
        }
        for name in STRATEGIES
    ]


def described(texts: dict[str, str]) -> list[dict[str, str]]:
    """``{value: text}`` as an ordered list of ``{"value", "text"}`` for templates."""
    return [{"value": value, "text": text} for value, text in texts.items()]
