"""``/ws/events/`` in-process through the real ASGI app (channels' ``WebsocketCommunicator``), and
events stored the way producers store them (so their frames go through the real broadcast path)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.db import connection

from apps.accounts.models import NamespaceGrant, Role
from apps.accounts.services import token_issue
from apps.events import broadcast
from apps.events.models import JobEvent
from apps.events.services import event_record
from apps.jobs.models import Cluster, TrainingJob
from controlplane.asgi import application

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
TIMEOUT = 5


def run(coro: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(coro)()


def communicator(key: str | None, origin: tuple[bytes, bytes] | None = ORIGIN) -> WebsocketCommunicator:
    headers = [origin] if origin else []
    if key is not None:
        headers.append((b"authorization", f"Token {key}".encode()))
    return WebsocketCommunicator(application, "/ws/events/", headers=headers)


def record(job: TrainingJob, n: int, kind: str = "fault.detected") -> list[JobEvent]:
    """Store ``n`` events the way every producer does (event_record → broadcast after commit)."""
    stored = [
        event_record(job=job, kind=kind, message=f"m{i}", source="test", data={"i": i}) for i in range(n)
    ]
    broadcast.flush()
    if threading.current_thread() is not threading.main_thread():
        connection.close()  # worker threads must not keep test-database sessions open
    return [e for e in stored if e is not None]


def viewer_world() -> dict[str, Any]:
    """Two namespaces with a job "llama" in each (``jobs``), and a viewer of team-a only
    (``viewer``) with an API token named "ws" (``key``)."""
    cluster = Cluster.objects.create(name=f"c-{uuid.uuid4().hex[:6]}")
    jobs = {
        ns: TrainingJob.objects.create(cluster=cluster, namespace=ns, name="llama", uid=str(uuid.uuid4()))
        for ns in ("team-a", "team-b")
    }
    viewer = get_user_model().objects.create_user(f"viewer-{uuid.uuid4().hex[:6]}", password="x")
    NamespaceGrant.objects.create(user=viewer, role=Role.VIEWER, cluster=cluster, namespace="team-a")
    _, key = token_issue(viewer, "ws")
    return {"jobs": jobs, "key": key, "viewer": viewer}


async def accepted(comm: WebsocketCommunicator) -> bool:
    """Whether the server accepts ``comm``'s handshake."""
    return (await comm.connect(timeout=TIMEOUT))[0]


async def connected(key: str | None, origin: tuple[bytes, bytes] | None = ORIGIN) -> WebsocketCommunicator:
    """A socket authenticated with the API token ``key``, its handshake accepted."""
    comm = communicator(key, origin)
    assert await accepted(comm)
    return comm


async def subscribed(comm: WebsocketCommunicator, job_id: int) -> WebsocketCommunicator:
    """``comm`` connected and subscribed to ``job_id`` from the start (nothing recorded yet, so
    nothing replayed)."""
    assert await accepted(comm)
    await comm.send_json_to({"subscribe": {"job": job_id, "after_seq": 0}})
    assert await comm.receive_nothing(timeout=0.2)
    return comm
