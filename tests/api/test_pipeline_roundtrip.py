"""The documented pipeline script, run as a subprocess against a live server and the simulated cluster.

It validates a policy (the CI gate), renders a manifest, and applies a policy to a running AscendJob;
the push itself (a Celery worker's job, tested with the push pipeline) is finished here by calling it
directly, and the live annotation is read back with the official client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.accounts.models import NamespaceGrant, Role
from apps.accounts.services import token_issue
from apps.api.policies.examples import EXAMPLE_MANIFEST
from apps.jobs.models import Cluster, TrainingJob
from apps.policies.push import push_sync
from mindcluster import keys as c
from simcluster.kubeapi import KubeApiEmulator
from tests.support import REPO_ROOT
from tests.support.cluster import create_live_job
from tests.support.world import training_job

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PIPELINE = REPO_ROOT / "docs" / "examples" / "pipeline.py"


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[tuple[KubeApiEmulator, Path]]:
    emu = KubeApiEmulator(host="127.0.0.1", port=0)
    emu.start()
    kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
    yield emu, Path(kubeconfig)
    emu.stop()


def run_pipeline(live_server: Any, key: str, *args: str) -> tuple[int, Any, str]:
    env = {**os.environ, "CONTROLPLANE_URL": live_server.url, "CONTROLPLANE_TOKEN": key}
    result = subprocess.run(
        [sys.executable, str(PIPELINE), *args], env=env, capture_output=True, text=True, timeout=60
    )
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else None, result.stderr


def test_pipeline_validates_renders_and_applies(live_server: Any, emulator: Any, tmp_path: Path) -> None:
    _, kubeconfig = emulator
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    namespace, name = f"ns-{uuid.uuid4().hex[:6]}", "llama-7b"
    live = create_live_job(api, namespace, name)
    cluster = Cluster.objects.create(name="sim", kubeconfig_path=str(kubeconfig))
    job = training_job(
        cluster, name, namespace, uid=live["metadata"]["uid"], source=TrainingJob.Source.ADOPTED
    )
    user = User.objects.create_user("ci-bot")
    NamespaceGrant.objects.create(role=Role.EDITOR, user=user, cluster=cluster, namespace=namespace)
    key = token_issue(user, "pipeline")[1]

    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"strategies": ["dump", "retry", "recover"], "pod_rescheduling": True}))
    bad_policy = tmp_path / "bad.json"
    bad_policy.write_text(json.dumps({"strategies": ["retry"], "fault_scheduling": "sometimes"}))
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(EXAMPLE_MANIFEST))

    # 1. The CI gate passes a good policy and fails a bad one.
    code, result, _ = run_pipeline(live_server, key, "validate", str(policy), "--manifest", str(manifest))
    assert code == 0 and result["valid"] is True
    code, result, _ = run_pipeline(live_server, key, "validate", str(bad_policy))
    assert code == 1 and result["errors"][0]["code"] == "invalid_choice"

    # 2. Render: YAML in, YAML out (the job plus its ConfigMap), ready for kubectl apply.
    out = tmp_path / "rendered.yaml"
    code, result, _ = run_pipeline(
        live_server, key, "render", "--manifest", str(manifest), "--policy", str(policy), "--out", str(out)
    )
    assert code == 0 and result["format"] == "yaml"
    documents = [d for d in yaml.safe_load_all(out.read_text()) if d]
    assert [d["kind"] for d in documents] == [c.ASCENDJOB_KIND, "ConfigMap"]
    assert documents[0]["metadata"]["annotations"][c.ANNOTATION_RECOVER_STRATEGY] == "retry,recover,dump"

    # 3. Apply to the running job: 202 and the sync record of the push pipeline.
    code, result, stderr = run_pipeline(
        live_server, key, "apply", "--job", f"{namespace}/{name}", str(policy)
    )
    assert code == 0, stderr
    assert result["status"] == 202 and result["job"] == job.pk and result["revision"] == 1
    assert result["sync"]["revision"] == 1 and result["sync"]["state"] == "pending"

    # The push (a Celery worker's job) finishes; the live AscendJob now carries the policy.
    synced = push_sync(sync_id=result["sync"]["id"], token="t")
    assert synced is not None and synced.state == "applied", synced and synced.last_error
    after = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, namespace, c.ASCENDJOB_PLURAL, name
    )
    annotations = after["metadata"]["annotations"]
    assert annotations[c.ANNOTATION_RECOVER_STRATEGY] == "retry,recover,dump"
    assert annotations[c.ANNOTATION_POLICY_REVISION] == "1"

    # Each run reads the current ETag first, so a second run (by id this time) makes revision 2.
    code, result, stderr = run_pipeline(live_server, key, "apply", "--job", str(job.pk), str(policy))
    assert code == 0 and result["revision"] == 2, stderr
    api.close()


def test_preview_diffs_a_draft_against_the_live_objects(emulator: Any) -> None:
    from rest_framework.test import APIClient

    _, kubeconfig = emulator
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    namespace = f"ns-{uuid.uuid4().hex[:6]}"
    live = create_live_job(api, namespace, "bert")
    cluster = Cluster.objects.create(name="sim2", kubeconfig_path=str(kubeconfig))
    job = TrainingJob.objects.create(
        cluster=cluster,
        namespace=namespace,
        name="bert",
        uid=live["metadata"]["uid"],
        framework="pytorch",
        replicas={"Master": 1, "Worker": 1},
        npus_per_pod=8,
    )
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("root2"))
    body = client.post(
        f"/api/v1/jobs/{job.pk}/policy/preview/", {"spec": {"strategies": ["recover"]}}, format="json"
    ).json()
    assert body["live"]["available"] is True and body["live"]["resource_version"]
    assert body["diff"]["ascendjob"]["metadata"]["annotations"][c.ANNOTATION_RECOVER_STRATEGY] == "recover"
    assert body["diff"]["podgroup"]["annotations"][c.ANNOTATION_RECOVER_STRATEGY] == "recover"
    # Nothing was written to the cluster.
    again = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, namespace, c.ASCENDJOB_PLURAL, "bert"
    )
    assert again["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    api.close()
