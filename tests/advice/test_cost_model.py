"""The cost model on seeded histories whose answer is worked out by hand.

Job: 2 pods x 8 NPUs = 16 NPUs. Window 7 days (the job is older), so the week's loss is the window's.
Priors (apps.advice.assumptions): detect 5 s (published <5 s), decide 0, retry 8, recover 45,
recover-in-place 25, dump 20, exit 5 (model: engine.PHASE_SECONDS), Job/Pod rescheduling 155 s
(published: 70-240 s), rollback = checkpoint period / 2.
"""

from __future__ import annotations

import pytest

from apps.advice.assumptions import MIN_SAMPLES
from apps.advice.candidates import combinations
from apps.advice.services import advise
from apps.jobs.models import TrainingJob
from apps.policies.services import job_context
from apps.policies.validation import validate_policy
from tests.support.advice import NPUS, add_incident, add_revision

PERIOD = 3600
FAULTS = 7


def npu_hours(seconds: float, faults: int = FAULTS) -> float:
    return round(faults * seconds * NPUS / 3600, 3)


def find(advice: dict, strategies: list[str], fault_scheduling: str = "grace", pod: bool = False) -> dict:
    """The candidate whose behaviour group holds this combination (its representative may differ)."""
    want = {"strategies": strategies, "fault_scheduling": fault_scheduling, "pod_rescheduling": pod}
    for candidate in advice["candidates"]:
        if candidate["spec"] == want or want in candidate["equivalents"]:
            return candidate
    raise AssertionError(f"no candidate {want}: {[c['spec'] for c in advice['candidates']]}")


def uce_history(job: TrainingJob) -> None:
    for _ in range(FAULTS):
        add_incident(job, kind="uce", ranks=(9,))  # pod 1, retried successfully


@pytest.fixture
def exit_job(job: TrainingJob) -> TrainingJob:
    """Current policy: no process strategy, Job-level rescheduling (exit + job rescheduling)."""
    add_revision(job, {"strategies": [], "fault_scheduling": "grace"}, sync="applied", created_with=True)
    uce_history(job)
    return job


def test_uce_retry_beats_exit_by_rollback_and_restart(exit_job: TrainingJob) -> None:
    advice = advise(exit_job, checkpoint_period_s=PERIOD, window_days=7)
    current = advice["current"]
    # exit + job rescheduling: detect 5 + Job-level 155 + rollback 1800 (process recovery off: Init
    # refused, Volcano reschedules without an exit step).
    assert current["expected_lost_npu_hours_per_week"] == npu_hours(5 + 155 + 1800)
    assert current["per_fault_kind"]["uce"]["paths"] == {"Job-level rescheduling": FAULTS}
    best = advice["candidates"][0]
    assert "retry" in best["spec"]["strategies"]
    assert best["expected_lost_npu_hours_per_week"] == npu_hours(5 + 8)
    assert best["per_fault_kind"]["uce"]["paths"] == {"retry": FAULTS}
    # The difference is exactly the rollback plus the restart, minus the retry itself.
    assert best["saves_vs_current"] == pytest.approx(npu_hours(1800 + 155 - 8), abs=0.002)
    recover = find(advice, ["recover"])
    assert recover["expected_lost_npu_hours_per_week"] == npu_hours(5 + 45)
    assert "no rollback" in recover["why"]
    assert best["range"] == [npu_hours(0 + 4), npu_hours(5 + 16)]


def test_dump_removes_the_rollback(exit_job: TrainingJob) -> None:
    advice = advise(exit_job, checkpoint_period_s=PERIOD, window_days=7)
    dump = find(advice, ["dump"])
    # A healthy UCE with dump alone: dump (20) → dump-exit (5) → Job-level rescheduling (155), no rollback.
    assert dump["per_fault_kind"]["uce"]["paths"] == {"dump → Job-level rescheduling": FAULTS}
    assert dump["expected_lost_npu_hours_per_week"] == npu_hours(5 + 20 + 5 + 155)
    exit_only = find(advice, ["exit"])
    assert exit_only["expected_lost_npu_hours_per_week"] == npu_hours(5 + 5 + 155 + 1800)
    # A longer checkpoint period costs exit more and dump nothing.
    longer = advise(exit_job, checkpoint_period_s=2 * PERIOD, window_days=7)
    assert (
        find(longer, ["dump"])["expected_lost_npu_hours_per_week"] == dump["expected_lost_npu_hours_per_week"]
    )
    assert find(longer, ["exit"])["expected_lost_npu_hours_per_week"] == npu_hours(5 + 5 + 155 + 3600)


def test_a_failed_retry_in_the_history_is_replayed_as_failed(job: TrainingJob) -> None:
    add_revision(job, {"strategies": ["retry", "recover"]}, sync="applied", created_with=True)
    for _ in range(FAULTS):
        add_incident(
            job,
            strategies=("retry", "recover"),
            attempts=(("retry", "failed"), ("recover", "succeeded")),
        )
    advice = advise(job, checkpoint_period_s=PERIOD, window_days=7)
    # retry fails (405: process chain intact) → recover: 5 + 8 + 45.
    assert advice["current"]["per_fault_kind"]["uce"]["paths"] == {"retry failed → recover": FAULTS}
    assert advice["current"]["expected_lost_npu_hours_per_week"] == npu_hours(5 + 8 + 45)
    # Skipping retry is cheaper on this history.
    assert advice["candidates"][0]["expected_lost_npu_hours_per_week"] < npu_hours(5 + 8 + 45)


def test_without_rescheduling_the_job_fails_and_ranks_last(exit_job: TrainingJob) -> None:
    advice = advise(exit_job, checkpoint_period_s=PERIOD, window_days=7)
    last = advice["candidates"][-1]
    assert last["job_fails"] and last["expected_lost_npu_hours_per_week"] is None
    assert "stops for good" in last["why"]
    assert all(not c["job_fails"] for c in advice["candidates"][:-1] if c["expected_lost_npu_hours_per_week"])


def test_every_candidate_is_valid_and_groups_cover_all_valid_combinations(exit_job: TrainingJob) -> None:
    advice = advise(exit_job, checkpoint_period_s=PERIOD, window_days=7)
    context = job_context(exit_job)
    for candidate in advice["candidates"]:
        result = validate_policy(candidate["policy"], context)
        assert result.ok, (candidate["spec"], [e.message for e in result.errors])
        assert candidate["policy"]["strategies"] == candidate["spec"]["strategies"]
    valid = sum(
        validate_policy(
            {
                "mindcluster_version": "26.1",
                "strategies": list(s),
                "fault_scheduling": fs,
                "pod_rescheduling": pr,
            },
            context,
        ).spec
        is not None
        for s, fs, pr in combinations()
    )
    assert sum(c["equivalent_policies"] for c in advice["candidates"]) == valid
    # Deduplicated by behaviour: no two candidates replay the history the same way.
    signatures = [
        tuple(sorted((k, tuple(sorted(v["paths"].items()))) for k, v in c["per_fault_kind"].items()))
        for c in advice["candidates"]
    ]
    assert len(signatures) == len(set(signatures))


def test_current_figure_uses_the_revision_in_effect(exit_job: TrainingJob) -> None:
    # A newer revision with retry is saved but its push has not reached the cluster.
    add_revision(exit_job, {"strategies": ["retry", "recover", "dump"]}, sync="pending")
    advice = advise(exit_job, checkpoint_period_s=PERIOD, window_days=7)
    assert advice["current"]["in_effect"] == {"source": "in-effect", "revision": 1}
    assert advice["current"]["spec"]["strategies"] == []
    assert advice["current"]["expected_lost_npu_hours_per_week"] == npu_hours(5 + 155 + 1800)


def test_measured_durations_replace_priors_with_enough_incidents(job: TrainingJob) -> None:
    add_revision(job, {"strategies": ["retry"]}, sync="applied", created_with=True)
    for i in range(MIN_SAMPLES):
        add_incident(job, detect_ms=2000 + 1000 * i, decide_ms=0, recover_ms=4000)
    advice = advise(job, checkpoint_period_s=PERIOD, window_days=7)
    named = {a["name"]: a for a in advice["assumptions"]}
    assert named["detect_s"]["source"] == "measured" and named["detect_s"]["value"] == 4.0
    assert named["detect_s"]["range"] == [2.0, 6.0] and named["detect_s"]["samples"] == MIN_SAMPLES
    assert named["retry_s"]["source"] == "measured" and named["retry_s"]["value"] == 4.0
    assert named["recover_s"]["source"] == "model"
    assert named["job_reschedule_s"]["source"] == "published"
    assert named["checkpoint_period_s"]["source"] == "user"
    # detect 4 + decide 0 + retry 4 = 8 s per fault.
    assert advice["current"]["expected_lost_npu_hours_per_week"] == npu_hours(8, faults=MIN_SAMPLES)


def test_too_few_incidents_keep_the_published_figure(job: TrainingJob) -> None:
    add_revision(job, {"strategies": ["retry"]}, sync="applied", created_with=True)
    for _ in range(MIN_SAMPLES - 1):
        add_incident(job, detect_ms=1000)
    named = {a["name"]: a for a in advise(job)["assumptions"]}
    assert named["detect_s"]["source"] == "published" and named["detect_s"]["samples"] == MIN_SAMPLES - 1
    assert named["checkpoint_period_s"]["source"] == "default"
    assert named["window_days"]["source"] == "default"


def test_node_fault_on_rank0_pod_cannot_use_pod_rescheduling(job: TrainingJob) -> None:
    add_revision(
        job, {"strategies": [], "fault_scheduling": "grace", "pod_rescheduling": True}, sync="applied"
    )
    for rank, strategy in ((0, "job-rescheduling"), (12, "pod-rescheduling")):
        add_incident(
            job,
            kind="node",
            ranks=(rank,),
            level="SeparateFault",
            strategies=(strategy,),
            attempts=(),
            outcome="rescheduled",
        )
    advice = advise(job, checkpoint_period_s=PERIOD, window_days=7)
    assert advice["current"]["per_fault_kind"]["node"]["paths"] == {
        "Job-level rescheduling": 1,
        "Pod-level rescheduling": 1,
    }
    assert advice["history"]["fault_classes"] == 2


def test_no_faults_no_loss(job: TrainingJob) -> None:
    advice = advise(job)
    assert advice["history"]["faults"] == 0
    assert advice["current"]["expected_lost_npu_hours_per_week"] == 0.0
    assert len(advice["candidates"]) == 1 and advice["candidates"][0]["same_as_current"]


def test_each_assumption_says_where_it_comes_from() -> None:
    # Issue #25 item 6: published figures carry the doc's path:line (source facts §7:
    # docs/zh/scheduling/04_usage/04_resumable_training/00_feature_description.md:130-133); the
    # process-level ones have no published figure, stay `model` and are measured from MIN_SAMPLES on.
    from apps.advice.assumptions import PRIORS, PUBLISHED_TIMINGS

    named = {name: prior.as_dict() for name, prior in PRIORS.items()}
    for name in ("detect_s", "job_reschedule_s", "pod_reschedule_s"):
        assert named[name]["source"] == "published" and named[name]["reference"] == PUBLISHED_TIMINGS
        assert named[name]["measured_from"] == MIN_SAMPLES
    for name in ("retry_s", "recover_in_place_s", "recover_s", "elastic_training_s", "dump_s", "exit_s"):
        assert named[name]["source"] == "model" and named[name]["reference"] is None
        assert (
            named[name]["measured_from"] == MIN_SAMPLES and f"{MIN_SAMPLES} incidents" in named[name]["note"]
        )
        assert named[name]["range"][0] < named[name]["value"] < named[name]["range"][1]
    assert named["platform_wait_s"]["reference"].endswith("const.go:159-161")
