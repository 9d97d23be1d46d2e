"""``/ws/events/`` in-process through the real ASGI app (channels' ``WebsocketCommunicator``), and
events stored the way producers store them (so their frames go through the real broadcast path)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.db import connection

from apps.events import broadcast
from apps.events.models import JobEvent
from apps.events.services import event_record
from apps.jobs.models import TrainingJob
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
