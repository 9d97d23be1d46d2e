"""A job with hand-computable fault histories (``tests.support.advice``): 2 pods x 8 NPUs = 16 NPUs,
created a month ago."""

from __future__ import annotations

from typing import Any

import pytest

from apps.jobs.models import Cluster, TrainingJob
from tests.support.advice import month_old_training_job


@pytest.fixture
def cluster(db: Any, tmp_path: Any) -> Cluster:
    return Cluster.objects.create(name="sim", kubeconfig_path=str(tmp_path / "missing-kubeconfig"))


@pytest.fixture
def job(cluster: Cluster) -> TrainingJob:
    return month_old_training_job(cluster)
