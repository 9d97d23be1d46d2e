"""Issue #16 item 10: a stale push cannot roll back a newer revision.

Two pushes of one job are interleaved deterministically through ``push_sync``'s ``checkpoint``
seam: revision 1 is held at a named stage (in a thread of this process), revision 2 is pushed to
the end, then revision 1 resumes. Real parts: the official client against the API emulator over
HTTP, the real database; no Celery (the interleaving needs both pushes in one process).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from kubernetes import client as k8s

from apps.jobs.models import TrainingJob
from apps.policies.models import PolicySync
from apps.policies.push import push_sync
from apps.policies.services import Actor, policy_revision_create
from mindcluster import keys as c
from tests.support import RedisServer
from tests.support.cluster import read_live

pytestmark = [pytest.mark.django_db(transaction=True)]


def save(job: TrainingJob, strategies: list[str]) -> PolicySync:
    spec = {"mindcluster_version": "26.1", "strategies": strategies, "pod_rescheduling": True}
    revision = policy_revision_create(job=job, spec=spec, actor=Actor(name="tester"))
    return PolicySync.objects.get(revision=revision)


class HeldPush:
    """``push_sync`` in a thread, stopped at ``stage`` until ``release()``."""

    def __init__(self, sync: PolicySync, stage: str) -> None:
        self.stage = stage
        self.reached = threading.Event()
        self.go = threading.Event()
        self.result: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, args=(sync.pk,), daemon=True)

    def _checkpoint(self, stage: str) -> None:
        if stage == self.stage:
            self.reached.set()
            assert self.go.wait(30)

    def _run(self, sync_id: int) -> None:
        try:
            self.result["sync"] = push_sync(sync_id=sync_id, token="older", checkpoint=self._checkpoint)
        finally:
            connection.close()

    def start(self) -> None:
        self.thread.start()
        assert self.reached.wait(30), f"the older push never reached {self.stage}"

    def release(self) -> PolicySync:
        self.go.set()
        self.thread.join(60)
        return self.result["sync"]


# "claimed": revision 1 passed its database check but has read nothing; the others: it has written
# some objects and is about to read the next one after revision 2 rewrote it.
@pytest.mark.parametrize("stage", ["claimed", "pushed:ascendjob", "pushed:podgroup"])
def test_older_push_resuming_after_a_newer_one_does_not_roll_it_back(
    stage: str, live_job: Callable[..., TrainingJob], kube: k8s.ApiClient, broker: RedisServer
) -> None:
    job = live_job()
    older = save(job, ["dump"])
    held = HeldPush(older, stage)
    held.start()
    newer = save(job, ["retry"])
    applied = push_sync(sync_id=newer.pk, token="newer")
    assert applied is not None and applied.state == PolicySync.State.APPLIED
    finished = held.release()
    assert finished.state == PolicySync.State.SUPERSEDED
    live, podgroup = read_live(kube, job)
    assert live["metadata"]["annotations"][c.ANNOTATION_POLICY_REVISION] == "2"
    assert live["metadata"]["annotations"][c.ANNOTATION_RECOVER_STRATEGY] == "retry"
    assert podgroup["metadata"]["annotations"][c.ANNOTATION_POLICY_REVISION] == "2"
    assert podgroup["metadata"]["annotations"][c.ANNOTATION_RECOVER_STRATEGY] == "retry"
    newer.refresh_from_db()
    assert newer.state == PolicySync.State.APPLIED
