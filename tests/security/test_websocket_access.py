"""Issue #16 items 2 and 15 on ``/ws/events/`` through the real ASGI stack and Redis channel layer:
access is rechecked while a socket is open (revoked token, deactivated user, ended session, removed
grant), and subscribing is limited per socket (rate and count) with a clear error frame."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone

from apps.accounts.models import ApiToken, NamespaceGrant
from apps.jobs.models import TrainingJob
from controlplane.asgi import application
from tests.support.websocket import TIMEOUT, communicator, connected, record, run, subscribed, viewer_world

pytestmark = pytest.mark.django_db(transaction=True)
CHECK = 0.3  # EVENTS_WS_ACCESS_CHECK_SECONDS in these tests; production default is 5 s
WITHIN = 3.0  # a revoked socket must be closed by then


@pytest.fixture
def world() -> dict[str, Any]:
    """As in tests/events/test_websocket.py: a job in team-a, its viewer with the token "ws"."""
    return viewer_world()


@pytest.fixture(autouse=True)
def fresh_pool() -> Iterator[None]:
    """Start the next test with a fresh connection pool.

    Sockets read the database in the event loop's worker threads; when a test's event loop ends,
    some of those threads end still holding a pooled connection, which the pool never gets back
    (tests/events/test_websocket.py alone strands 3 of DB_POOL_MAX=8). Closing the pool after each
    test keeps these tests from starving the ones that follow.
    """
    yield
    connection.close()
    connection.close_pool()


def browser_session(user: Any) -> tuple[str, WebsocketCommunicator]:
    """A signed-in browser's session key, and a socket that sends its session cookie."""
    browser = Client()
    browser.force_login(user)
    session_key = browser.cookies["sessionid"].value
    headers = [(b"origin", b"http://127.0.0.1:8000"), (b"cookie", f"sessionid={session_key}".encode())]
    return session_key, WebsocketCommunicator(application, "/ws/events/", headers=headers)


async def closed_within(comm: WebsocketCommunicator, seconds: float) -> tuple[list[dict[str, Any]], int]:
    """Frames received before the close, and the close code; fails if the socket stays open."""
    frames: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"socket still open after {seconds} s; frames: {frames}"
        message = await comm.receive_output(timeout=left)
        if message["type"] == "websocket.close":
            return frames, message.get("code", 1000)
        frames.append(json.loads(message["text"]))


# Each way of losing access: the socket it applies to (a program's token or a browser's session
# cookie), what takes the access away (run outside the event loop, as another request would), and a
# word the closing error frame must contain ("" where only the close code is checked).
AccessLoss = Callable[[dict[str, Any]], tuple[WebsocketCommunicator, Callable[[], None], str]]


def _token_revoked(world: dict[str, Any]) -> tuple[WebsocketCommunicator, Callable[[], None], str]:
    def revoke() -> None:
        ApiToken.objects.filter(name="ws").update(revoked_at=timezone.now())
        connection.close()

    return communicator(world["key"]), revoke, "revoked"


def _user_deactivated(world: dict[str, Any]) -> tuple[WebsocketCommunicator, Callable[[], None], str]:
    def deactivate() -> None:
        get_user_model().objects.filter(pk=world["viewer"].pk).update(is_active=False)
        connection.close()

    return communicator(world["key"]), deactivate, ""


def _signed_out(world: dict[str, Any]) -> tuple[WebsocketCommunicator, Callable[[], None], str]:
    session_key, socket = browser_session(world["viewer"])

    def sign_out() -> None:
        # What /logout/ does to the session (flush deletes it), without a second request thread.
        SessionStore(session_key).delete()
        connection.close()

    return socket, sign_out, ""


def _password_changed(world: dict[str, Any]) -> tuple[WebsocketCommunicator, Callable[[], None], str]:
    # A browser's *other* sockets: the session that changed the password is not this one.
    _, socket = browser_session(world["viewer"])

    def change_password() -> None:
        user = get_user_model().objects.get(pk=world["viewer"].pk)
        user.set_password("a-new-password-9")
        user.save()
        connection.close()

    return socket, change_password, "password"


@override_settings(EVENTS_WS_ACCESS_CHECK_SECONDS=CHECK)
@pytest.mark.parametrize(
    "loss",
    [_token_revoked, _user_deactivated, _signed_out, _password_changed],
    ids=["token-revoked", "user-deactivated", "signed-out", "password-changed"],
)
def test_losing_access_closes_the_socket(world: dict[str, Any], loss: AccessLoss) -> None:
    job = world["jobs"]["team-a"]
    socket, take_away, word = loss(world)

    async def scenario() -> None:
        comm = await subscribed(socket, job.pk)
        await sync_to_async(take_away, thread_sensitive=False)()
        frames, code = await closed_within(comm, WITHIN)
        assert code == 4403
        if word:
            assert frames[-1]["type"] == "error" and frames[-1]["code"] == "access_revoked"
            assert word in frames[-1]["error"]
        await comm.disconnect()

    run(scenario)


@override_settings(EVENTS_WS_ACCESS_CHECK_SECONDS=CHECK)
def test_removing_the_grant_stops_that_jobs_events(world: dict[str, Any]) -> None:
    job = world["jobs"]["team-a"]

    async def scenario() -> None:
        comm = await subscribed(communicator(world["key"]), job.pk)
        await sync_to_async(NamespaceGrant.objects.filter(user=world["viewer"]).delete)()
        frame = await comm.receive_json_from(timeout=WITHIN)
        assert frame == {
            "type": "error",
            "code": "access_revoked",
            "job": job.pk,
            "error": "you may no longer see this job; its events stopped",
        }
        await sync_to_async(record, thread_sensitive=False)(job, 2)
        assert await comm.receive_nothing(timeout=0.5)  # no events of it any more
        await comm.disconnect()

    run(scenario)


@override_settings(EVENTS_WS_SUBSCRIBE_BURST=5, EVENTS_WS_SUBSCRIBE_RATE=1.0)
def test_subscribe_spam_is_rate_limited_per_socket(world: dict[str, Any]) -> None:
    job = world["jobs"]["team-a"]
    record(job, 3)

    async def scenario() -> None:
        comm = await connected(world["key"])
        replays = 0
        limited: list[dict[str, Any]] = []
        for _ in range(20):
            await comm.send_json_to({"subscribe": {"job": job.pk, "after_seq": 0}})
        for _ in range(5 * 3 + 15):  # 5 replays of 3 events, 15 refusals, in any interleaving
            frame = await comm.receive_json_from(timeout=TIMEOUT)
            if frame["type"] == "event" and frame["seq"] == 1:
                replays += 1
            elif frame["type"] == "error":
                limited.append(frame)
        assert await comm.receive_nothing(timeout=0.5)
        assert replays == 5  # the burst, then nothing more is replayed
        assert len(limited) == 15 and all(f["code"] == "rate_limited" for f in limited)
        assert limited[0]["retry_after"] > 0
        await comm.disconnect()

    run(scenario)


@override_settings(EVENTS_WS_MAX_SUBSCRIPTIONS=2)
def test_a_socket_follows_at_most_the_configured_number_of_jobs(world: dict[str, Any]) -> None:
    cluster = world["jobs"]["team-a"].cluster
    extra = [
        TrainingJob.objects.create(cluster=cluster, namespace="team-a", name=f"j{i}", uid=f"u{i}")
        for i in range(2)
    ]
    jobs = [world["jobs"]["team-a"].pk, *(j.pk for j in extra)]

    async def scenario() -> None:
        comm = await connected(world["key"])
        for job_id in jobs:
            await comm.send_json_to({"subscribe": {"job": job_id, "after_seq": 0}})
        frame = await comm.receive_json_from(timeout=TIMEOUT)
        assert frame["type"] == "error" and frame["code"] == "too_many_subscriptions"
        assert frame["job"] == jobs[2] and frame["limit"] == 2
        # Unsubscribing makes room; re-subscribing a followed job does not count twice.
        await comm.send_json_to({"unsubscribe": {"job": jobs[0]}})
        await comm.send_json_to({"subscribe": {"job": jobs[1], "after_seq": 0}})
        await comm.send_json_to({"subscribe": {"job": jobs[2], "after_seq": 0}})
        assert await comm.receive_nothing(timeout=0.5)
        await comm.disconnect()

    run(scenario)
