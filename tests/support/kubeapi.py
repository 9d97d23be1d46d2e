"""Bare objects for the Kubernetes API emulator's own tests (``tests/simcluster/test_kubeapi_*``)."""

from __future__ import annotations

ACJ = ("mindxdl.gitee.com", "v1")


def ascendjob(name: str, labels: dict[str, str] | None = None, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec or {"replicas": 1},
    }


def pod(name: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "ascend", "image": "busybox"}]},
    }
