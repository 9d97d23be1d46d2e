"""Property tests: for any valid policy and any seed-shaped job, rendering is schema-valid, order-blind,
idempotent, switchable (s1 then s2 equals s2) and never drops or duplicates what the user wrote."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from apps.core.jsonmerge import apply_merge_patch
from apps.policies.rendering import render
from apps.policies.spec import (
    FAULT_SCHEDULING_VALUES,
    PLATFORM_STRATEGIES,
    RELEASES,
    STRATEGIES,
    STRATEGY_SINCE,
    SUB_HEALTHY_VALUES,
    JobContext,
    PolicySpec,
    release_at_least,
    sort_strategies,
)
from apps.policies.validation import validate_policy
from tests.policies.crd_schema import crd_errors
from tests.support.policies import seed_job

SHARED_DIR = Path(__file__).resolve().parents[1] / "fixtures"
PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


@st.composite
def policy_dicts(draw: st.DrawFn, framework: str = "pytorch") -> dict[str, Any]:
    release = draw(st.sampled_from(RELEASES))
    available = [
        s
        for s in STRATEGIES
        if release_at_least(release, STRATEGY_SINCE[s])
        and not (s == "elastic-training" and framework != "pytorch")
    ]
    strategies = draw(st.lists(st.sampled_from(available), unique=True, max_size=len(available)))
    raw: dict[str, Any] = {
        "mindcluster_version": release,
        "strategies": strategies,
        "fault_scheduling": draw(st.sampled_from(FAULT_SCHEDULING_VALUES)),
        "pod_rescheduling": draw(st.booleans()),
        "fault_retry_times": draw(st.sampled_from([0, 0, 1, 3, 100_000])),
        "backoff_limit": draw(st.none() | st.integers(1, 2_147_483_647)),
        "max_restarts": draw(st.integers(0, 32_767)),
        "monitor_interval": draw(st.integers(1, 3_600)),
        "wait_reschedule_timeout": draw(st.integers(30, 270)),
        "sub_healthy_strategy": draw(st.sampled_from(SUB_HEALTHY_VALUES)),
        "ttp_port": draw(st.sampled_from([8000, 8100]) | st.integers(30_000, 65_535)),
    }
    answerable = [s for s in sort_strategies(strategies) if s in PLATFORM_STRATEGIES and s != "exit"]
    if answerable and draw(st.booleans()):
        raw.update(platform_mode=True, default_strategy=draw(st.sampled_from(answerable)))
    return raw


@st.composite
def user_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """Seed-shaped jobs with extra env, ports, volumes and args the policy must leave alone."""
    framework = draw(st.sampled_from(["pytorch", "mindspore"]))
    job = seed_job(
        framework=framework, workers=draw(st.integers(0, 63)), npus=draw(st.sampled_from([1, 8, 16]))
    )
    for rspec in job["spec"]["replicaSpecs"].values():
        pod = rspec["template"]["spec"]
        container = pod["containers"][0]
        extra_env = draw(
            st.lists(st.sampled_from(["HCCL_CONNECT_TIMEOUT", "LOG_LEVEL", "DATA_PATH"]), unique=True)
        )
        container["env"] += [{"name": name, "value": "1"} for name in extra_env]
        extra_ports = draw(st.lists(st.integers(3000, 3999), unique=True, max_size=3))
        container["ports"] += [{"containerPort": p, "name": f"user-{p}"} for p in extra_ports]
        volumes = draw(st.lists(st.sampled_from(["data", "output", "dshm"]), unique=True))
        pod["volumes"] += [{"name": v, "emptyDir": {}} for v in volumes]
        container["volumeMounts"] += [{"name": v, "mountPath": f"/job/{v}"} for v in volumes]
        container["args"].append(draw(st.text(min_size=0, max_size=20)))
        if draw(st.booleans()):
            pod["containers"].append(
                {"name": "sidecar", "image": "busybox", "env": [{"name": "POD_IP", "value": "x"}]}
            )
    return job


def _valid_policy(draw: st.DrawFn, job: dict[str, Any]) -> PolicySpec:
    """A policy for ``job``; invalid draws are discarded."""
    raw = draw(policy_dicts(job["metadata"]["labels"]["framework"]))
    result = validate_policy(raw, JobContext.from_manifest(job))
    assume(result.ok)
    assert result.spec is not None
    return result.spec


@st.composite
def job_and_policy(draw: st.DrawFn) -> tuple[dict[str, Any], PolicySpec]:
    job = draw(user_jobs())
    return job, _valid_policy(draw, job)


# A job, the policy it had, and the policy it gets next.
JobAndTwoPolicies = tuple[dict[str, Any], PolicySpec, PolicySpec]


@st.composite
def job_and_two_policies(draw: st.DrawFn) -> JobAndTwoPolicies:
    job, first = draw(job_and_policy())
    return job, first, _valid_policy(draw, job)


def stored(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server keeps it: ObjectMeta omits empty label/annotation maps, which a merge
    patch that removes the last owned key leaves behind."""
    obj["metadata"] = {key: value for key, value in obj["metadata"].items() if value != {}}
    return obj


@PROPERTY_SETTINGS
@given(job_and_policy())
def test_rendered_manifest_passes_the_crd_schema(case: tuple[dict[str, Any], PolicySpec]) -> None:
    job, spec = case
    assert crd_errors(render(job, spec).manifest, SHARED_DIR) == []


@PROPERTY_SETTINGS
@given(job_and_policy(), st.randoms(use_true_random=False))
def test_strategy_order_does_not_matter(case: tuple[dict[str, Any], PolicySpec], rnd: Any) -> None:
    job, spec = case
    shuffled = list(spec.strategies)
    rnd.shuffle(shuffled)
    other = PolicySpec(**{**spec.__dict__, "strategies": tuple(shuffled)})
    first, second = render(job, spec), render(job, other)
    assert first.manifest == second.manifest
    assert first.annotations.get("recover-strategy", "") == ",".join(sort_strategies(spec.strategies))
    assert " " not in first.annotations.get("recover-strategy", "")


@PROPERTY_SETTINGS
@given(job_and_policy())
def test_rendering_twice_equals_once(case: tuple[dict[str, Any], PolicySpec]) -> None:
    job, spec = case
    once = render(job, spec)
    twice = render(once.manifest, spec)
    assert twice.manifest == once.manifest
    assert twice.podgroup_patch == once.podgroup_patch
    assert twice.labels == once.labels and twice.annotations == once.annotations
    # The second patch changes nothing (a push of an up-to-date object is a no-op).
    assert stored(apply_merge_patch(once.manifest, twice.job_patch)) == once.manifest


@PROPERTY_SETTINGS
@given(job_and_two_policies())
def test_switching_policies_equals_rendering_the_last_one(case: JobAndTwoPolicies) -> None:
    job, first, second = case
    switched = render(render(job, first).manifest, second)
    direct = render(job, second)
    assert switched.manifest == direct.manifest
    assert switched.labels == direct.labels and switched.annotations == direct.annotations
    assert switched.removed_labels == direct.removed_labels
    assert switched.podgroup_patch == direct.podgroup_patch


@PROPERTY_SETTINGS
@given(job_and_policy())
def test_user_entries_are_preserved(case: tuple[dict[str, Any], PolicySpec]) -> None:
    job, spec = case
    original = copy.deepcopy(job)
    rendered = render(job, spec).manifest
    assert job == original  # the input is never mutated
    for role, rspec in original["spec"]["replicaSpecs"].items():
        before_pod = rspec["template"]["spec"]
        after_pod = rendered["spec"]["replicaSpecs"][role]["template"]["spec"]
        _assert_prefix_kept(before_pod["volumes"], after_pod["volumes"], "name")
        for before, after in zip(before_pod["containers"], after_pod["containers"], strict=True):
            if before["name"] != "ascend":
                assert after == before
                continue
            assert after["args"] == before["args"] and after["command"] == before["command"]
            for key, ident in (("env", "name"), ("ports", "name"), ("volumeMounts", "mountPath")):
                _assert_prefix_kept(before[key], after[key], ident)


def _assert_prefix_kept(before: list[dict[str, Any]], after: list[dict[str, Any]], ident: str) -> None:
    assert after[: len(before)] == before  # nothing dropped, nothing reordered, nothing changed
    counts = Counter(item[ident] for item in after)
    assert [name for name, count in counts.items() if count > 1] == []


@PROPERTY_SETTINGS
@given(job_and_two_policies())
def test_job_patch_turns_the_previous_object_into_the_manifest(case: JobAndTwoPolicies) -> None:
    job, first, second = case
    previous = render(job, first).manifest
    rendered = render(previous, second)
    assert stored(apply_merge_patch(previous, rendered.job_patch)) == rendered.manifest
