"""Candidate policies: the job's current spec with every combination of the fields that decide what
ClusterD does with a fault (strategies, fault-scheduling, pod-rescheduling), kept only when the one
validator (``apps.policies.validation.validate_policy``) accepts it for this job.

Validation of ~384 combinations takes tens of milliseconds; the result depends only on the base spec
and the job's facts, so it is cached per process.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Final

from apps.advice.replay import EngineKey, engine_key
from apps.jobs.models import TrainingJob
from apps.policies.services import job_context
from apps.policies.spec import FAULT_SCHEDULING_VALUES, STRATEGIES, PolicySpec
from apps.policies.validation import validate_policy

VARIED_FIELDS: Final = ("strategies", "fault_scheduling", "pod_rescheduling")


@dataclass(frozen=True)
class Candidate:
    spec: PolicySpec
    warnings: tuple[str, ...]
    key: EngineKey

    @cached_property
    def varied(self) -> dict[str, Any]:
        return {
            "strategies": list(self.spec.strategies),
            "fault_scheduling": self.spec.fault_scheduling,
            "pod_rescheduling": self.spec.pod_rescheduling,
        }


def combinations() -> list[tuple[tuple[str, ...], str, bool]]:
    """Every (strategies, fault_scheduling, pod_rescheduling): 2^6 x 3 x 2 = 384."""
    subsets = [c for r in range(len(STRATEGIES) + 1) for c in itertools.combinations(STRATEGIES, r)]
    return [(s, fs, pr) for s in subsets for fs in FAULT_SCHEDULING_VALUES for pr in (False, True)]


def valid_candidates(base: PolicySpec, job: Any) -> tuple[Candidate, ...]:
    """The valid combinations for ``job`` (a ``TrainingJob``), built on ``base``."""
    replicas = json.dumps(sorted((str(k), int(v)) for k, v in (job.replicas or {}).items()))
    return _cached(
        json.dumps(base.to_dict(), sort_keys=True),
        job.name,
        job.namespace,
        job.framework,
        job.mindcluster_version,
        replicas,
        job.npus_per_pod,
    )


@lru_cache(maxsize=512)
def _cached(
    base_json: str, name: str, namespace: str, framework: str, release: str, replicas: str, npus_per_pod: int
) -> tuple[Candidate, ...]:
    # An unsaved row: job_context reads only these fields, and nothing here touches the database.
    job = TrainingJob(
        name=name,
        namespace=namespace,
        framework=framework,
        mindcluster_version=release,
        replicas=dict(json.loads(replicas)),
        npus_per_pod=npus_per_pod,
    )
    context = job_context(job)
    base = json.loads(base_json)
    found = []
    for strategies, fault_scheduling, pod_rescheduling in combinations():
        raw = {
            **base,
            "strategies": list(strategies),
            "fault_scheduling": fault_scheduling,
            "pod_rescheduling": pod_rescheduling,
        }
        result = validate_policy(raw, context)
        if result.spec is not None:
            found.append(
                Candidate(
                    result.spec, tuple(w.message for w in result.warnings), engine_key(result.spec, framework)
                )
            )
    return tuple(found)
