"""The env the ascend-operator injects into a job's ``ascend`` container for its recovery keys.

Pure MindCluster knowledge, read from ``component/ascend-operator/pkg/controllers/v1/env.go`` at
Ascend/mind-cluster 22bb3d98 (release-specific lines name the tag): which env each
``recover-strategy`` name sets (``STRATEGY_ENV``), the training-side tokens it adds, the sub-health
hot-switch env, and from which release the operator injects any of it (``OPERATOR_ENV_SINCE``;
before that the user sets the process-recovery env by hand). The simulated operator injects this
env; the renderer reads ``operator_injects_env`` to know whether it must render the env itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mindcluster import keys as k
from mindcluster.releases import release_at_least

# The operator's env injection (doAddProcessRecoverEnv, addSubHealthyEnv) and the PodGroup's
# process-recover-enable label (job.go:479-491) arrive in v7.2.RC1; up to 7.1 the user sets both.
OPERATOR_ENV_SINCE: Final = "7.2"


def operator_injects_env(release: str) -> bool:
    """Whether the operator of ``release`` injects the process-recovery env itself."""
    return release_at_least(release, OPERATOR_ENV_SINCE)


@dataclass(frozen=True)
class StrategyEnv:
    """What one ``recover-strategy`` name makes the operator set (addEnvByStrategy, env.go:400-417)."""

    env: Mapping[str, str]
    pytorch_token: str  # joined into HIGH_AVAILABILITY
    mindspore_tokens: tuple[str, ...] = ()  # joined into MS_ENABLE_TFT
    frameworks: tuple[str, ...] = ("pytorch", "mindspore")
    source: str = field(default="", compare=False)  # env.go lines

    def tokens(self, framework: str) -> tuple[str, ...] | None:
        """The tokens for ``framework``; None when the strategy sets nothing for it."""
        if framework not in self.frameworks:
            return None
        return (self.pytorch_token,) if framework == "pytorch" else self.mindspore_tokens


_RECOVER_ENV: Final = {k.ENV_PROCESS_RECOVER: "on", k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE: "1"}
STRATEGY_ENV: Final[Mapping[str, StrategyEnv]] = {
    "recover": StrategyEnv(_RECOVER_ENV, "recover", ("ARF:1",), source="env.go:419-431 addRecoverEnv"),
    # exit is handled like recover (env.go:410-411).
    "exit": StrategyEnv(_RECOVER_ENV, "recover", ("ARF:1",), source="env.go:410-411"),
    "retry": StrategyEnv(_RECOVER_ENV, "retry", ("UCE:1", "HCCE:1"), source="env.go:433-446 addRetryEnv"),
    "recover-in-place": StrategyEnv(
        {**_RECOVER_ENV, k.ENV_ENABLE_RESTART_FAULT_PROCESS: "on"},
        "recover",
        ("ARF:1",),
        source="env.go:448-461 addRecoverInPlaceEnv",
    ),
    "dump": StrategyEnv(_RECOVER_ENV, "dump", ("TTP:1",), source="env.go:463-475 addDumpEnv"),
    # PyTorch only, and without ELASTIC_PROCESS_RECOVER_ENABLE (env.go:477-488 addElasticTrainingEnv).
    "elastic-training": StrategyEnv(
        {k.ENV_PROCESS_RECOVER: "on"},
        "elastic-training",
        frameworks=("pytorch",),
        source="env.go:477-488 addElasticTrainingEnv",
    ),
}


def raw_recover_strategy(job: Mapping[str, Any]) -> str:
    """``getJobRecoverStrategy`` (job.go:493-501): the annotation as written, ``""`` when absent."""
    return str(((job["metadata"].get("annotations")) or {}).get(k.ANNOTATION_RECOVER_STRATEGY) or "")


def ms_braces(tokens: Iterable[str], release: str) -> str:
    """MS_ENABLE_TFT's value: ``'{…}'`` with literal single quotes in 7.2-7.3 (v7.2.RC1 env.go:280,
    v7.3.0 env.go:370), plain ``{…}`` from 26.0 (env.go:390)."""
    body = ",".join(sorted(tokens))
    return f"'{{{body}}}'" if release in ("7.2", "7.3") else f"{{{body}}}"


def _ms_content(value: str) -> str:
    """``extractMsRecoverContent`` (env.go:108-123): the text between the braces (and quotes)."""
    value = value.strip()
    for prefix, suffix in (("'{", "}'"), ("{", "}")):
        if value.startswith(prefix) and value.endswith(suffix):
            return value[len(prefix) : -len(suffix)].strip()
    return value


def _comma_set(value: str) -> set[str]:
    return {part.strip() for part in value.split(",") if part.strip()}


def process_recover_env(job: Mapping[str, Any], release: str) -> dict[str, str]:
    """``doAddProcessRecoverEnv`` (env.go:375-398): the env derived from ``recover-strategy``.

    The annotation is split on ``,`` without trimming, exactly like the Go code, so ``"retry, dump"``
    contributes only ``retry``. PyTorch gets HIGH_AVAILABILITY + HCCL_ASYNC_ERROR_HANDLING=0 as
    soon as the annotation is non-empty, even if no name in it is known (HIGH_AVAILABILITY is then
    empty); MindSpore gets MS_ENABLE_TFT, MINDIO_FOR_MINDSPORE and MS_ENABLE_THM; TensorFlow never
    calls it (setTensorflowEnv, env.go:274-313).
    """
    labels = (job["metadata"].get("labels")) or {}
    framework = labels.get(k.LABEL_FRAMEWORK)
    raw = raw_recover_strategy(job)
    if not raw or framework not in ("pytorch", "mindspore"):
        return {}
    env: dict[str, str] = {}
    tokens: set[str] = set()
    for strategy in raw.split(","):
        rule = STRATEGY_ENV.get(strategy)
        if rule is None:
            continue  # addEnvByStrategy default branch (env.go:414-416)
        added = rule.tokens(framework)
        if added is None:
            continue  # not for this framework (elastic-training outside PyTorch, env.go:482-485)
        tokens.update(added)
        env.update(rule.env)
    if framework == "pytorch":
        env["HCCL_ASYNC_ERROR_HANDLING"] = "0"
        env["HIGH_AVAILABILITY"] = ",".join(sorted(tokens))
    else:
        if labels.get(k.LABEL_POD_RESCHEDULING) == "on":  # env.go:387-389
            tokens.add("RSC:1")
        env["MS_ENABLE_TFT"] = ms_braces(tokens, release)
        env["MINDIO_FOR_MINDSPORE"] = "1"
        env["MS_ENABLE_THM"] = "{HCCL_WATCHDOG:0}"
    return env


def _add_with_dedup(env: list[dict[str, str]], name: str, value: str, release: str) -> None:
    """``addEnvValueWithDedup`` (env.go:42-66, from v7.3): merge HIGH_AVAILABILITY / MS_ENABLE_TFT
    token sets, overwrite other names, append when absent."""
    for entry in env:
        if entry.get("name") != name:
            continue
        old = str(entry.get("value", ""))
        if name == "HIGH_AVAILABILITY":
            entry["value"] = ",".join(sorted(_comma_set(old) | _comma_set(value)))
        elif name == "MS_ENABLE_TFT":
            entry["value"] = ms_braces(
                _comma_set(_ms_content(old)) | _comma_set(_ms_content(value)), release
            )
        else:
            entry["value"] = value
        return
    env.append({"name": name, "value": value})


def add_recovery_env(job: Mapping[str, Any], env: list[dict[str, str]], release: str) -> None:
    """Append the recovery env to ``env`` (the container's env so far, user entries included) in the
    order setPytorchEnv / setMindSporeEnv call the helpers (env.go:204-272). Nothing before 7.2."""
    if not operator_injects_env(release):
        return
    labels = (job["metadata"].get("labels")) or {}
    framework = labels.get(k.LABEL_FRAMEWORK)
    # Appended without de-duplication (addEnvValue, env.go:33-38): hand-set copies show up twice.
    env.extend({"name": n, "value": v} for n, v in sorted(process_recover_env(job, release).items()))
    # addMSPodScheduleEnv (env.go:337-347): {RSC:1} only when no MS_ENABLE_TFT is there yet.
    if (
        framework == "mindspore"
        and labels.get(k.LABEL_POD_RESCHEDULING) == "on"
        and not any(e.get("name") == "MS_ENABLE_TFT" for e in env)
    ):
        env.append({"name": "MS_ENABLE_TFT", "value": ms_braces({"RSC:1"}, release)})
    if labels.get(k.LABEL_SUB_HEALTHY_STRATEGY) != "hotSwitch":
        return
    if not release_at_least(release, "7.3"):
        # v7.2.RC1 env.go:244-256: PyTorch only, plain appends.
        if framework == "pytorch":
            env += [
                {"name": k.ENV_PROCESS_RECOVER, "value": "on"},
                {"name": k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE, "value": "1"},
                {"name": "HIGH_AVAILABILITY", "value": "recover"},
            ]
        return
    # addSubHealthyEnv (env.go:349-365): merged into what is there.
    if framework == "pytorch":
        _add_with_dedup(env, "HIGH_AVAILABILITY", "recover", release)
    elif framework == "mindspore":
        _add_with_dedup(env, "MS_ENABLE_TFT", ms_braces({"ARF:1"}, release), release)
        _add_with_dedup(env, "MINDIO_FOR_MINDSPORE", "1", release)
    else:
        return
    _add_with_dedup(env, k.ENV_PROCESS_RECOVER, "on", release)
    _add_with_dedup(env, k.ENV_ELASTIC_PROCESS_RECOVER_ENABLE, "1", release)


def recovery_env(job: Mapping[str, Any], release: str) -> list[dict[str, str]]:
    """The recovery env the operator adds for ``release``, for a container without env."""
    env: list[dict[str, str]] = []
    add_recovery_env(job, env, release)
    return env
