"""The API personas and a small world for them.

- **owner**: editor on ``team-a`` of cluster ``sim`` (a direct user grant);
- **teammate**: viewer on ``team-a`` through the ``team-a-viewers`` group;
- **outsider**: signed in, no grant at all;
- **admin**: admin on ``team-a`` through the ``team-a-admins`` group.

Every persona talks to the API with its own token, as a pipeline would. The ``world`` and
``superuser_client`` fixtures (root ``tests/conftest.py``) build them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from apps.accounts.models import NamespaceGrant, Role
from apps.accounts.services import token_issue
from apps.audit.actors import Actor
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.builtin_presets import BUILTIN_PRESETS
from apps.policies.models import Preset
from apps.policies.services import policy_revision_create
from mindcluster import keys as c

NAMESPACE = "team-a"
SPEC: dict[str, Any] = {"mindcluster_version": "26.1", "strategies": ["retry", "recover", "dump"]}
PERSONAS = ("owner", "teammate", "outsider", "admin")

# A valid ``POST /api/v1/jobs/`` body for the world's namespace (tests vary one field at a time).
JOB_REGISTRATION = {
    "cluster": "sim",
    "namespace": NAMESPACE,
    "name": "gpt-small",
    "framework": "pytorch",
    "replicas": {"Master": 1, "Worker": 3},
    "npus_per_pod": 8,
    "mindcluster_version": "7.2",
}
# A minimal AscendJob in the owner's namespace, as a pipeline would send for preview/render.
MANIFEST = {
    "apiVersion": "mindxdl.gitee.com/v1",
    "kind": "AscendJob",
    "metadata": {"name": "demo", "namespace": NAMESPACE, "labels": {"framework": "pytorch"}},
    "spec": {
        "replicaSpecs": {
            "Master": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "ascend", "image": "img"}]}},
            }
        }
    },
}


@dataclass
class World:
    cluster: Cluster
    job: TrainingJob
    other_job: TrainingJob
    users: dict[str, User]
    keys: dict[str, str]
    owner_preset: Preset

    def client(self, persona: str | None) -> APIClient:
        """An API client authenticated with the persona's token (None = anonymous)."""
        client = APIClient()
        if persona is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Token {self.keys[persona]}")
        return client


def make_user(name: str, **extra: Any) -> User:
    return User.objects.create_user(name, password="pw", **extra)


def grant(
    role: str,
    *,
    user: User | None = None,
    group: Group | None = None,
    cluster: Cluster | None = None,
    namespace: str = NAMESPACE,
) -> NamespaceGrant:
    return NamespaceGrant.objects.create(
        role=role, user=user, group=group, cluster=cluster, namespace=namespace
    )


def training_job(cluster: Cluster, name: str, namespace: str = NAMESPACE, **fields: Any) -> TrainingJob:
    """A TrainingJob row (2 pods x 8 NPUs of a 26.1 PyTorch job), as if the ingester had adopted it;
    ``fields`` add to or replace those (e.g. ``uid``, ``replicas``)."""
    row: dict[str, Any] = {
        "framework": "pytorch",
        "replicas": {"Master": 1, "Worker": 1},
        "npus_per_pod": 8,
        "mindcluster_version": "26.1",
    }
    return TrainingJob.objects.create(cluster=cluster, namespace=namespace, name=name, **{**row, **fields})


def operator_podgroup(
    job: TrainingJob, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    """A PodGroup as the operator creates it: the job's keys copied, recover-strategy → enable=on."""
    labels = dict(labels)
    if c.ANNOTATION_RECOVER_STRATEGY in annotations:
        labels[c.LABEL_PROCESS_RECOVER_ENABLE] = "on"  # ascend-operator job.go:479-491
    return {
        "metadata": {
            "name": f"{job.name}-{job.uid}",
            "namespace": job.namespace,
            "uid": str(uuid.uuid4()),
            "creationTimestamp": "2026-08-21T10:00:00Z",
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{"kind": c.ASCENDJOB_KIND, "name": job.name, "uid": job.uid}],
        }
    }


def install_builtin_presets() -> None:
    # Written here rather than with services.presets_sync_builtin, which expects an older shape of
    # BUILTIN_PRESETS ({"spec", "description"}) than the one builtin_presets.py now ships (spec only).
    for name, spec in BUILTIN_PRESETS.items():
        Preset.objects.update_or_create(
            name=name, namespace="", cluster=None, defaults={"spec": spec, "builtin": True}
        )


def build_world(tmp_path: Path) -> World:
    """The personas, their grants and tokens, a cluster ``sim`` and two jobs (``team-a``, ``team-b``)."""
    install_builtin_presets()
    # A kubeconfig that does not exist: the cluster is "unreachable", which preview must report calmly.
    cluster = Cluster.objects.create(name="sim", kubeconfig_path=str(tmp_path / "missing-kubeconfig"))
    job = training_job(cluster, "llama")
    other_job = training_job(cluster, "secret", namespace="team-b")
    policy_revision_create(job=job, spec=SPEC, actor=Actor(name="setup"))
    users = {name: make_user(name) for name in PERSONAS}
    viewers = Group.objects.create(name="team-a-viewers")
    admins = Group.objects.create(name="team-a-admins")
    users["teammate"].groups.add(viewers)
    users["admin"].groups.add(admins)
    grant(Role.EDITOR, user=users["owner"], cluster=cluster)
    grant(Role.VIEWER, group=viewers)  # every cluster
    grant(Role.ADMIN, group=admins, cluster=cluster)
    keys = {name: token_issue(user, f"{name}-ci")[1] for name, user in users.items()}
    owner_preset = Preset.objects.create(
        name="owners-preset", spec={"strategies": ["dump"]}, created_by=users["owner"]
    )
    return World(
        cluster=cluster, job=job, other_job=other_job, users=users, keys=keys, owner_preset=owner_preset
    )


def superuser_api_client() -> APIClient:
    root = User.objects.create_superuser("root", password="pw")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_issue(root, 'root-ci')[1]}")
    return client
