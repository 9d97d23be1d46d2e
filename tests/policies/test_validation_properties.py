"""Properties of ``validate_policy``: total on any input, canonical output, order-independent."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.policies.spec import (
    DECISION_ACTIONS,
    FAULT_SCHEDULING_VALUES,
    FAULT_TYPES,
    FRAMEWORKS,
    PLATFORM_STRATEGIES,
    RELEASES,
    STRATEGIES,
    STRATEGY_SINCE,
    SUB_HEALTHY_VALUES,
    JobContext,
    PolicySpec,
    ReplicaFacts,
    release_at_least,
)
from apps.policies.validation import ValidationResult, codes, validate_manifest, validate_policy
from apps.policies.validation.policy import FIELD_NAMES

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from([*STRATEGIES, *RELEASES, *FAULT_SCHEDULING_VALUES, *SUB_HEALTHY_VALUES, "", " ", ",,"]),
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=25,
)
# Objects with the policy's own keys reach far deeper into the validator than random keys do.
policy_like = st.dictionaries(
    st.sampled_from([*FIELD_NAMES, "timeout_s", "strategy", "rules"]), json_values, max_size=8
)
python_objects = st.one_of(
    st.builds(object),
    st.complex_numbers(),
    st.binary(max_size=10),
    st.sets(st.integers(), max_size=3),
    st.tuples(st.integers(), st.text(max_size=5)),
    st.just(10**5000),  # str() of this raises in Python 3.11
    st.just(float("nan")),
    st.dictionaries(st.one_of(st.integers(), st.tuples(st.integers()), st.none()), json_values, max_size=3),
    st.dictionaries(
        st.sampled_from(FIELD_NAMES), st.one_of(st.builds(object), st.just(10**5000)), max_size=3
    ),
)
replica_facts = st.builds(
    ReplicaFacts,
    role=st.sampled_from(["Master", "Worker", "Scheduler", "Chief", "x"]),
    replicas=st.integers(0, 20_000),
    restart_policy=st.sampled_from(["", "Never", "OnFailure", "Always", "ExitCode", "bogus"]),
    npus_per_pod=st.integers(0, 16),
    container_names=st.just(("ascend",)),
    env_names=st.lists(
        st.sampled_from(["PROCESS_RECOVER", "PYTORCH_NO_NPU_MEMORY_CACHING", "POD_IP", "X"]), max_size=3
    ).map(tuple),
    host_network=st.booleans(),
)
job_contexts = st.one_of(
    st.none(),
    st.builds(
        JobContext,
        framework=st.one_of(st.none(), st.sampled_from([*FRAMEWORKS, "jax"])),
        mindcluster_version=st.one_of(st.none(), st.sampled_from([*RELEASES, "7.3.0", "junk"])),
        scheduler_name=st.one_of(st.none(), st.sampled_from(["volcano", "default-scheduler", ""])),
        replicas=st.lists(replica_facts, max_size=3).map(tuple),
        labels=st.dictionaries(
            st.sampled_from(["process-recover-enable", "ring-controller.atlas", "framework"]),
            st.sampled_from(["on", "ascend-910", "ascend-910b", "pytorch"]),
        ),
    ),
)


def check_result(result: Any) -> None:
    assert isinstance(result, ValidationResult)
    catalogue = codes()
    for issue in (*result.errors, *result.warnings):
        assert issue.code in catalogue and issue.code != "internal_error", issue
        assert issue.field.startswith("/") and issue.message
    if result.ok:
        assert result.spec is not None
    else:
        assert result.spec is None
        assert all(issue.code and issue.field.startswith("/") for issue in result.errors)
    result.to_dict()  # serialisable without raising


@SETTINGS
@given(raw=st.one_of(json_values, policy_like, python_objects), job=job_contexts)
def test_never_raises_on_garbage(raw: Any, job: JobContext | None) -> None:
    check_result(validate_policy(raw, job))


@SETTINGS
@given(manifest=st.one_of(json_values, python_objects))
def test_manifest_validation_never_raises(manifest: Any) -> None:
    for issue in validate_manifest(manifest):
        assert issue.code in codes() and issue.code != "internal_error"
        assert issue.field.startswith("manifest:/")


@SETTINGS
@given(raw=policy_like, job=job_contexts)
def test_accepted_specs_round_trip(raw: dict[str, Any], job: JobContext | None) -> None:
    result = validate_policy(raw, job)
    if result.spec is not None:
        again = validate_policy(result.spec.to_dict())
        assert again.spec == result.spec
        assert again.spec.to_dict() == result.spec.to_dict()


@SETTINGS
@given(policy=st.deferred(lambda: valid_policies()), job=job_contexts)
def test_a_stored_spec_reads_back_without_validation(policy: dict[str, Any], job: JobContext | None) -> None:
    """The push reads stored revisions with ``PolicySpec.from_stored``: it must equal the validated spec."""
    result = validate_policy(policy, job)
    if result.spec is not None:
        stored = PolicySpec.from_stored(result.spec.to_dict())
        assert stored == result.spec
        assert stored.to_dict() == result.spec.to_dict()


@SETTINGS
@given(
    chosen=st.lists(st.sampled_from(STRATEGIES), min_size=1, max_size=6, unique=True).flatmap(
        lambda names: st.tuples(st.just(names), st.permutations(names), st.lists(st.sampled_from(names)))
    )
)
def test_strategy_annotation_is_independent_of_order(chosen: tuple[list[str], list[str], list[str]]) -> None:
    names, shuffled, repeats = chosen
    expected = ",".join(sorted(names, key=STRATEGIES.index))
    for form in (shuffled, [*shuffled, *repeats], ",".join(shuffled), ",".join([*repeats, *shuffled])):
        result = validate_policy({"strategies": form})
        assert result.spec is not None, result.to_dict()
        assert result.spec.strategy_annotation == expected


@st.composite
def valid_policies(draw: st.DrawFn) -> dict[str, Any]:
    """Specs built to satisfy every error rule, so they must be accepted (warnings are fine)."""
    release = draw(st.sampled_from(RELEASES))
    available = [s for s in STRATEGIES if release_at_least(release, STRATEGY_SINCE[s])]
    strategies = draw(st.lists(st.sampled_from(available), unique=True, max_size=6))
    # Platform mode needs a standing answer the policy configures: retry, recover or dump (issue #13).
    platform_mode = any(s in ("retry", "recover", "dump") for s in strategies) and draw(st.booleans())
    # graceExit needs dump; hotSwitch exists from 7.2 (issue #25: hot_switch_needs_7_2).
    allowed_sub_healthy = [
        v
        for v in SUB_HEALTHY_VALUES
        if (v != "graceExit" or "dump" in strategies)
        and (v != "hotSwitch" or release_at_least(release, "7.2"))
    ]
    sub_healthy = draw(st.sampled_from(allowed_sub_healthy))
    spec: dict[str, Any] = {
        "mindcluster_version": release,
        "strategies": draw(st.sampled_from([strategies, ",".join(strategies)])),
        "fault_scheduling": draw(st.sampled_from(FAULT_SCHEDULING_VALUES)),
        "pod_rescheduling": draw(st.booleans()),
        "fault_retry_times": draw(st.integers(0, 100_000)),
        "backoff_limit": draw(st.one_of(st.none(), st.integers(1, 2**31 - 1))),
        "max_restarts": draw(st.integers(0, 32_767)),
        "monitor_interval": draw(st.integers(1, 3_600)),
        "wait_reschedule_timeout": draw(st.integers(30, 270)),
        "sub_healthy_strategy": sub_healthy,
        "ttp_port": draw(st.integers(1_024, 65_535).filter(lambda p: p not in (2222, 8899, 9601, 9602))),
        "platform_mode": platform_mode,
    }
    if platform_mode:
        answerable = [s for s in PLATFORM_STRATEGIES if s in strategies or s == "exit"]
        actions = [a for a in DECISION_ACTIONS if a in answerable or a == "ask"]
        # The default is also the standing answer: retry, recover or dump only (issue #13).
        spec["default_strategy"] = draw(st.sampled_from([s for s in answerable if s != "exit"]))
        spec["decision_timeout_s"] = draw(st.integers(1, 290))
        spec["decision_rules"] = draw(st.lists(rules(actions), max_size=4))
    # Any other key may be left out (it then takes its default); these ones carry the constraints.
    required = ("platform_mode", "strategies", "default_strategy")
    return {key: value for key, value in spec.items() if key in required or draw(st.booleans())}


def rules(actions: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    match = st.fixed_dictionaries(
        {},
        optional={
            "fault_type": st.one_of(
                st.sampled_from(FAULT_TYPES), st.lists(st.sampled_from(FAULT_TYPES), min_size=1, unique=True)
            ),
            "fault_level": st.lists(
                st.sampled_from(["RestartRequest", "SeparateNPU"]), min_size=1, unique=True
            ),
            "min_ranks": st.integers(1, 8),
            "rank0": st.booleans(),
            "repeat_within_s": st.integers(1, 86_400),
        },
    )
    return st.fixed_dictionaries({"match": match, "strategy": st.sampled_from(actions)})


@SETTINGS
@given(policy=valid_policies())
def test_generated_valid_specs_are_accepted(policy: dict[str, Any]) -> None:
    result = validate_policy(policy)
    assert result.ok, result.to_dict()["errors"]
    assert isinstance(result.spec, PolicySpec)
    for key, value in policy.items():
        if key not in ("strategies", "mindcluster_version", "decision_rules"):
            assert getattr(result.spec, key) == value
    assert validate_policy(result.spec.to_dict()).spec == result.spec


identities = st.tuples(st.one_of(st.none(), st.text(max_size=70)), st.one_of(st.none(), st.text(max_size=70)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=st.one_of(policy_like, st.deferred(lambda: valid_policies())),
    job=job_contexts.filter(lambda job: job is not None),
    identity=identities,
)
def test_the_job_s_name_and_namespace_change_nothing(
    raw: dict[str, Any], job: JobContext, identity: tuple[str | None, str | None]
) -> None:
    """The policy GET keeps warnings per (spec, facts without the job's name and namespace)
    (apps/api/policies/bodies.py ``_warnings_key``): that is only right while no rule reads them."""
    name, namespace = identity
    renamed = dataclasses.replace(job, name=name, namespace=namespace)
    assert validate_policy(raw, renamed).to_dict() == validate_policy(raw, job).to_dict()
