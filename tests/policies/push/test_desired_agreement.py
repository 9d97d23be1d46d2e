"""Issue #14 item 3: push, drift, preview, admission and recreate agree with ``desired_state``.

For a few policies, one revision is previewed, pushed, drift-checked, previewed again, admitted (a
dry-run CREATE of the same job through a preset) and rendered for a recreate. Every one of them
must write or report the same keys, spec and revision annotation that ``desired_state`` computes.
Real parts: the official client against the API emulator over HTTP, the real database; the push
runs in this process (``push_sync``), as a worker would run it.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from apps.accounts.actors import Actor
from apps.admission.recreate import fresh_manifest
from apps.admission.review import admit
from apps.core.jsonmerge import apply_merge_patch
from apps.jobs.models import TrainingJob
from apps.policies.builtin_presets import builtin_preset
from apps.policies.desired import REVISION_ANNOTATION, desired_state, same_value
from apps.policies.models import PolicySync, Preset
from apps.policies.preview import policy_preview
from apps.policies.push import push_sync
from apps.policies.reconcile import drift_of
from apps.policies.services import policy_revision_create
from apps.policies.syncs import spec_of
from mindcluster import keys as c
from tests.support import RedisServer
from tests.support.cluster import read_live

pytestmark = [pytest.mark.django_db(transaction=True)]

SPECS: list[dict[str, Any]] = [
    {"mindcluster_version": "26.1", "strategies": ["dump", "retry", "recover"], "pod_rescheduling": True},
    {"mindcluster_version": "26.1", "strategies": ["recover"], "fault_retry_times": 3, "backoff_limit": 5},
    {"mindcluster_version": "26.1", "strategies": [], "fault_scheduling": "force"},
    {**(builtin_preset("platform-mode") or {}), "mindcluster_version": "26.1"},
]
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


def _apply_json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 add/replace/remove (what the admission webhook answers), enough for this test."""
    doc = copy.deepcopy(doc)
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = doc
        for part in parents:
            target = target[part]
        if op["op"] == "remove":
            del target[last]
        else:
            target[last] = copy.deepcopy(op["value"])
    return doc


def _keys(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    meta = obj.get("metadata") or {}
    return {"labels": dict(meta.get("labels") or {}), "annotations": dict(meta.get("annotations") or {})}


IDS = ["retry-recover-dump", "recover-retries-backoff", "no-strategy", "platform-mode"]


@pytest.mark.parametrize("raw", SPECS, ids=IDS)
def test_push_drift_preview_admission_and_recreate_agree_with_desired_state(
    raw: dict[str, Any], live_job: Callable[..., TrainingJob], kube: k8s.ApiClient, broker: RedisServer
) -> None:
    job = live_job()
    before_job, before_pg = read_live(kube, job)
    revision = policy_revision_create(job=job, spec=raw, actor=Actor(name="tester"))
    sync = PolicySync.objects.get(revision=revision)
    state = desired_state(before_job, spec_of(revision), revision.number)
    stamp = str(revision.number)
    assert state.manifest["metadata"]["annotations"][REVISION_ANNOTATION] == stamp
    assert state.podgroup["annotations"][REVISION_ANNOTATION] == stamp

    # Preview, before the push: the same render, the same keys, the patches the push will write.
    job.refresh_from_db()
    preview = policy_preview(job=job, raw_spec=None)
    assert preview["revision"] == revision.number
    assert preview["render"]["manifest"] == state.manifest
    assert preview["keys"] == [key.as_dict() for key in state.keys]
    diff = preview["diff"]

    # The push writes exactly that.
    pushed = push_sync(sync_id=sync.pk, token="agreement")
    assert pushed is not None and pushed.state == PolicySync.State.APPLIED, pushed and pushed.last_error
    after_job, after_pg = read_live(kube, job)
    assert _keys(after_job) == _keys(apply_merge_patch(before_job, diff["ascendjob"]))
    assert after_job["spec"] == state.manifest["spec"]
    assert _keys(after_job) == _keys(state.manifest)
    for key in state.keys:
        if key.section in ("labels", "annotations"):
            assert after_job["metadata"][key.section].get(key.key) == key.value, key
    expected_pg = apply_merge_patch(_keys(before_pg), diff["podgroup"])
    assert _keys(after_pg) == expected_pg
    for section, wanted in state.podgroup.items():
        for key, value in wanted.items():
            assert same_value(section, key, after_pg["metadata"].get(section) or {}, value), (section, key)
    assert after_pg["metadata"]["annotations"][REVISION_ANNOTATION] == stamp

    # Drift sees nothing, and a second preview has nothing left to write.
    pushed.refresh_from_db()
    assert drift_of(pushed) == []
    again = policy_preview(job=job, raw_spec=None)
    assert again["diff"] == {"ascendjob": {}, "podgroup": {}}

    # Recreate renders the same job (server fields dropped), stamped with the same revision.
    fresh = fresh_manifest(after_job, revision)
    assert _keys(fresh) == _keys(after_job) and fresh["spec"] == after_job["spec"]

    # Admission of the same job, created with this policy as a preset, gives the same object.
    preset = Preset.objects.create(name=f"agree-{uuid.uuid4().hex[:6]}", spec=dict(raw))
    created = copy.deepcopy(before_job)
    for field in SERVER_FIELDS:
        created["metadata"].pop(field, None)
    created["metadata"].setdefault("annotations", {})["recovery.mindcluster.io/preset"] = preset.name
    decision = admit(
        {
            "uid": "review-1",
            "kind": {"group": c.ASCENDJOB_GROUP, "version": c.ASCENDJOB_VERSION, "kind": c.ASCENDJOB_KIND},
            "operation": "CREATE",
            "namespace": job.namespace,
            "object": created,
            "dryRun": True,
        },
        job.cluster.name,
    )
    assert decision.revision == 1 == revision.number
    admitted = _apply_json_patch(created, decision.patch)
    admitted["metadata"]["annotations"].pop("recovery.mindcluster.io/preset")
    assert _keys(admitted) == _keys(after_job)
    assert admitted["spec"] == after_job["spec"]
