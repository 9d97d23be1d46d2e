# ruff: noqa: E501  (the kinds table keeps one row per line so it reads as a table)
"""The typed event kinds: stable strings that the API, the websocket and webhooks promise to keep.

| kind | produced from | data keys (besides ``sources``) |
|---|---|---|
| ``fault.detected`` | ClusterD ``fault.Fault`` stream, ``reset-config-<job>`` ``RankList``, Event ``FaultDetected`` (the first source to report a fault wins; the others enrich its incident) | ``ranks``, ``node``, ``device``, ``code``, ``level``, ``fault_type`` |
| ``training.stopped`` | ``reset-config-<job>`` ``FaultFlushing`` false → true (ClusterD's ``stopTrain``) | ``ranks``, ``restart_type`` |
| ``training.exited`` | PodGroup ``ProcessRecoverStatus=exit-completed`` | ``status`` |
| ``strategy.chosen`` | Event ``StrategyChosen``: the first strategy of an incident | ``strategy``, ``reason`` |
| ``strategy.changed`` | Event ``StrategyChosen`` after a failed attempt (ClusterD's fallback) | ``strategy``, ``previous``, ``reason`` |
| ``recovery.succeeded`` | PodGroup ``ProcessRecoverStatus=<strategy>-success`` (not dump) | ``strategy``, ``status`` |
| ``recovery.failed`` | PodGroup ``ProcessRecoverStatus=<strategy>-failed`` | ``strategy``, ``status`` |
| ``dump.saved`` | PodGroup ``ProcessRecoverStatus=dump-success`` | ``status`` |
| ``pod.rescheduled`` | ``mindx-dl/job-reschedule-reason`` new record covering some pods | ``reasons``, ``pods``, ``nodes``, ``total`` |
| ``job.rescheduled`` | the same, covering every pod of the job | ``reasons``, ``pods``, ``nodes``, ``total`` |
| ``job.phase_changed`` | AscendJob ``status.conditions``: the last true condition changed | ``phase``, ``previous``, ``reason`` |
| ``job.warning`` | any other Warning Event on the AscendJob (operator validation: ``InvalidFramework`` …) | ``reason`` |
| ``decision.requested`` | PodGroup ``ProcessConfirmFault`` written (platform mode; recorded by ``apps.decisions``) | ``faults`` |
| ``decision.answered`` | the platform's answer (``apps.decisions``) | ``strategy``, ``decided_by`` |
| ``decision.completed`` | ClusterD's outcome for the answer (``apps.decisions``) | ``outcome`` |
| ``policy.applied`` / ``policy.failed`` / ``policy.drifted`` / ``policy.drift_resolved`` | the push pipeline | see ``apps.policies.push`` |
| ``policy.admitted`` / ``policy.admission_skipped`` | the admission webhook (``apps.admission``) | ``revision``, ``sources``, ``warnings`` |
| ``job.recreated`` | "recreate to apply" (``apps.admission.recreate``) | ``old_uid``, ``new_uid``, ``revision`` |

The mapping from Kubernetes Event reasons is a table (``apps.ingest.k8s_events.REASONS``), so a
real ClusterD's reasons can be added without code changes elsewhere.
"""

from __future__ import annotations

from typing import Final

FAULT_DETECTED: Final = "fault.detected"
TRAINING_STOPPED: Final = "training.stopped"
TRAINING_EXITED: Final = "training.exited"
STRATEGY_CHOSEN: Final = "strategy.chosen"
STRATEGY_CHANGED: Final = "strategy.changed"
RECOVERY_SUCCEEDED: Final = "recovery.succeeded"
RECOVERY_FAILED: Final = "recovery.failed"
DUMP_SAVED: Final = "dump.saved"
POD_RESCHEDULED: Final = "pod.rescheduled"
JOB_RESCHEDULED: Final = "job.rescheduled"
JOB_PHASE_CHANGED: Final = "job.phase_changed"
JOB_WARNING: Final = "job.warning"
DECISION_REQUESTED: Final = "decision.requested"
DECISION_ANSWERED: Final = "decision.answered"
DECISION_COMPLETED: Final = "decision.completed"
POLICY_APPLIED: Final = "policy.applied"
POLICY_FAILED: Final = "policy.failed"
POLICY_DRIFTED: Final = "policy.drifted"
POLICY_DRIFT_RESOLVED: Final = "policy.drift_resolved"
POLICY_ADMITTED: Final = "policy.admitted"
POLICY_ADMISSION_SKIPPED: Final = "policy.admission_skipped"
JOB_RECREATED: Final = "job.recreated"

ALL_KINDS: Final = (
    FAULT_DETECTED,
    TRAINING_STOPPED,
    TRAINING_EXITED,
    STRATEGY_CHOSEN,
    STRATEGY_CHANGED,
    RECOVERY_SUCCEEDED,
    RECOVERY_FAILED,
    DUMP_SAVED,
    POD_RESCHEDULED,
    JOB_RESCHEDULED,
    JOB_PHASE_CHANGED,
    JOB_WARNING,
    DECISION_REQUESTED,
    DECISION_ANSWERED,
    DECISION_COMPLETED,
    POLICY_APPLIED,
    POLICY_FAILED,
    POLICY_DRIFTED,
    POLICY_DRIFT_RESOLVED,
    POLICY_ADMITTED,
    POLICY_ADMISSION_SKIPPED,
    JOB_RECREATED,
)

RESCHEDULE_KINDS: Final = frozenset({POD_RESCHEDULED, JOB_RESCHEDULED})
STRATEGY_KINDS: Final = frozenset({STRATEGY_CHOSEN, STRATEGY_CHANGED})

# Severity an event gets unless its source says otherwise.
DEFAULT_SEVERITY: Final = {
    FAULT_DETECTED: "error",
    TRAINING_STOPPED: "warning",
    TRAINING_EXITED: "warning",
    RECOVERY_FAILED: "error",
    POD_RESCHEDULED: "warning",
    JOB_RESCHEDULED: "warning",
    JOB_WARNING: "warning",
    DECISION_REQUESTED: "warning",
    POLICY_FAILED: "error",
    POLICY_DRIFTED: "warning",
    POLICY_ADMISSION_SKIPPED: "warning",
}


def severity_of(kind: str) -> str:
    """The default severity of ``kind`` (``info`` for anything not listed)."""
    return DEFAULT_SEVERITY.get(kind, "info")
