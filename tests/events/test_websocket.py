"""``/ws/events/`` through the real ASGI stack (``controlplane.asgi.application``), ``WebsocketCommunicator``.

The channel layer is the real Redis of ``TEST_REDIS_URL``; events are stored through ``event_record``
and reach the socket through the real broadcast path (after commit).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import override_settings

from apps.accounts.services import token_issue
from apps.events import broadcast
from apps.events.fanout import hub
from apps.events.models import JobEvent
from apps.jobs.models import TrainingJob
from tests.support.websocket import (
    TIMEOUT,
    accepted,
    communicator,
    connected,
    record,
    run,
    subscribed,
    viewer_world,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world() -> dict[str, Any]:
    """Two namespaces, a job in each; a viewer of team-a with a token; a superuser."""
    admin = get_user_model().objects.create_superuser(f"admin-{uuid.uuid4().hex[:6]}", password="x")
    _, admin_key = token_issue(admin, "ws-admin")
    return {**viewer_world(), "admin_key": admin_key}


async def record_unannounced(
    monkeypatch: pytest.MonkeyPatch, job: TrainingJob, n: int, kind: str = "fault.detected"
) -> list[JobEvent]:
    """Store events whose frames are lost (as when Redis drops them)."""
    with monkeypatch.context() as patch:
        patch.setattr(broadcast, "broadcast_event", lambda event: None)
        return await sync_to_async(record, thread_sensitive=False)(job, n, kind)


async def frames_until(
    comm: WebsocketCommunicator, done: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    while not done(got):
        got.append(json.loads(await comm.receive_from(timeout=TIMEOUT)))
    return got


def test_unauthenticated_connection_is_refused() -> None:
    async def scenario() -> None:
        comm = communicator(None)
        assert not await accepted(comm)
        await comm.disconnect()

    run(scenario)


def test_bad_token_is_refused(world: dict[str, Any]) -> None:
    async def scenario() -> None:
        assert not await accepted(communicator("not-a-real-key"))

    run(scenario)


def test_foreign_origin_is_refused(world: dict[str, Any]) -> None:
    async def scenario() -> None:
        assert not await accepted(communicator(world["key"], origin=(b"origin", b"https://evil.example.com")))
        # Without a token, a missing Origin is refused too (a browser always sends one) ...
        assert not await accepted(communicator(None, origin=None))

    run(scenario)


def test_a_program_with_a_token_needs_no_origin(world: dict[str, Any]) -> None:
    async def scenario() -> None:
        # ... but a program sends its token and no Origin, as for REST (design.md §4.3).
        program = await connected(world["key"], origin=None)
        await program.disconnect()

    run(scenario)


def test_another_namespaces_job_is_refused(world: dict[str, Any]) -> None:
    other = world["jobs"]["team-b"]
    record(other, 2)

    async def scenario() -> None:
        comm = await connected(world["key"])
        await comm.send_json_to({"subscribe": {"job": other.pk, "after_seq": 0}})
        frame = await comm.receive_json_from(timeout=TIMEOUT)
        assert frame == {"type": "error", "error": "job not found", "code": "not_found", "job": other.pk}
        assert await comm.receive_nothing(timeout=0.3)  # and none of its events
        await comm.disconnect()

    run(scenario)


def test_replay_then_live_without_gap_or_duplicate(world: dict[str, Any]) -> None:
    job = world["jobs"]["team-a"]
    record(job, 5)

    async def scenario() -> None:
        comm = await connected(world["key"])
        await comm.send_json_to({"subscribe": {"job": job.pk, "after_seq": 2}})
        # Events stored while the replay runs must come exactly once, in order.
        await sync_to_async(record, thread_sensitive=False)(job, 5)
        frames = await frames_until(comm, lambda got: len(got) >= 8)
        assert [f["seq"] for f in frames] == list(range(3, 11))
        assert all(f["type"] == "event" and f["job"] == job.pk for f in frames)
        assert await comm.receive_nothing(timeout=0.5)
        await comm.disconnect()

    run(scenario)


def test_lost_frames_are_filled_from_the_database(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    job = world["jobs"]["team-a"]

    async def scenario() -> None:
        comm = await subscribed(communicator(world["key"]), job.pk)
        # Frames 1-3 are "lost" (as when Redis drops them); frame 4 arrives and reveals the gap.
        await record_unannounced(monkeypatch, job, 3)
        await sync_to_async(record, thread_sensitive=False)(job, 1)
        frames = await frames_until(comm, lambda got: len(got) >= 4)
        assert [f["seq"] for f in frames] == [1, 2, 3, 4]
        # A lost *last* frame is found by the periodic check.
        await record_unannounced(monkeypatch, job, 1)
        frames = await frames_until(comm, lambda got: len(got) >= 1)
        assert [f["seq"] for f in frames] == [5]
        await comm.disconnect()

    with override_settings(EVENTS_WS_CHECK_SECONDS=0.3):
        run(scenario)


def test_a_backlog_is_coalesced_but_state_changes_are_not(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    job = world["jobs"]["team-a"]

    async def scenario() -> None:
        comm = await subscribed(communicator(world["key"]), job.pk)
        stored = await record_unannounced(monkeypatch, job, 5)
        stored += await record_unannounced(monkeypatch, job, 1, "strategy.chosen")
        stored += await record_unannounced(monkeypatch, job, 4)
        # All eleven frames reach the socket's inbox before it drains: a socket that is behind.
        for event in stored:
            hub().deliver(broadcast.event_frame(event))
        frames = await frames_until(comm, lambda got: len(got) >= 3)
        assert frames[0] == {
            "type": "coalesced",
            "job": job.pk,
            "from_seq": 1,
            "to_seq": 5,
            "count": 5,
            "kinds": {"fault.detected": 5},
        }
        assert (frames[1]["type"], frames[1]["seq"], frames[1]["kind"]) == ("event", 6, "strategy.chosen")
        assert (frames[2]["type"], frames[2]["from_seq"], frames[2]["to_seq"]) == ("coalesced", 7, 10)
        # Below the threshold, frames go out one by one again, continuing the seq.
        await sync_to_async(record, thread_sensitive=False)(job, 1)
        (frame,) = await frames_until(comm, lambda got: len(got) >= 1)
        assert (frame["type"], frame["seq"]) == ("event", 11)
        await comm.disconnect()

    with override_settings(EVENTS_WS_COALESCE_AFTER=3):
        run(scenario)


def test_too_far_behind_gets_resync(world: dict[str, Any]) -> None:
    job = world["jobs"]["team-a"]
    record(job, 30)

    async def scenario() -> None:
        comm = await connected(world["key"])
        await comm.send_json_to({"subscribe": {"job": job.pk, "after_seq": 5}})
        frame = await comm.receive_json_from(timeout=TIMEOUT)
        assert frame == {"type": "resync", "job": job.pk, "from_seq": 5, "to_seq": 30}
        # The client pages over REST, then subscribes again from where it got to.
        await comm.send_json_to({"subscribe": {"job": job.pk, "after_seq": 25}})
        frames = await frames_until(comm, lambda got: len(got) >= 5)
        assert [f["seq"] for f in frames] == [26, 27, 28, 29, 30]
        await comm.disconnect()

    with override_settings(EVENTS_WS_MAX_REPLAY=10):
        run(scenario)


def test_jobs_summary_stream_only_shows_visible_jobs_and_coalesces(world: dict[str, Any]) -> None:
    mine, other = world["jobs"]["team-a"], world["jobs"]["team-b"]

    async def scenario() -> None:
        comm = await connected(world["key"])
        await comm.send_json_to({"subscribe": {"jobs": "all"}})
        assert await comm.receive_nothing(timeout=0.2)
        await sync_to_async(record, thread_sensitive=False)(other, 3)
        await sync_to_async(record, thread_sensitive=False)(mine, 20)
        frame = await comm.receive_json_from(timeout=TIMEOUT)
        assert frame["type"] == "job" and frame["job"] == mine.pk
        # Twenty events within one interval → one summary carrying the newest seq, none for team-b.
        frames = [frame]
        while not await comm.receive_nothing(timeout=0.6):
            frames.append(await comm.receive_json_from(timeout=TIMEOUT))
        assert {f["job"] for f in frames} == {mine.pk}
        assert frames[-1]["last_seq"] == 20 and len(frames) < 20
        await comm.disconnect()

    run(scenario)


def test_bad_messages_get_error_frames(world: dict[str, Any]) -> None:
    async def scenario() -> None:
        comm = await connected(world["admin_key"])
        for bad in (
            [1, 2],
            {"subscribe": {"job": "7"}},
            {"subscribe": {"job": 1, "after_seq": -1}},
            {"hello": {}},
        ):
            await comm.send_json_to(bad)
            frame = await comm.receive_json_from(timeout=TIMEOUT)
            assert frame["type"] == "error", frame
        await comm.send_to(text_data="not json at all")
        await comm.disconnect()

    run(scenario)


def test_frames_are_json_round_trippable(world: dict[str, Any]) -> None:
    job = world["jobs"]["team-a"]
    (event,) = record(job, 1)
    message = broadcast.event_frame(event)
    assert json.loads(message["text"]) == event.as_message() == json.loads(json.dumps(event.as_message()))
    assert message["frame"] == {"job": job.pk, "seq": event.seq, "kind": event.kind}
    summary = broadcast.summary_frame(event)["frame"]
    assert json.loads(json.dumps(summary)) == summary


def test_warm_builds_the_channel_layer_before_the_first_event(caplog: pytest.LogCaptureFixture) -> None:
    """``broadcast.warm`` (the ingester calls it before its first event): the layer is built then,
    not in front of the first frame; a layer that cannot be built is logged, never raised."""
    from channels.layers import channel_layers

    channel_layers.backends.pop("default", None)  # as in a process that has broadcast nothing yet
    broadcast.warm()
    assert "default" in channel_layers.backends
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": "no.such.ChannelLayer"}}):
        broadcast.warm()
    assert "cannot prepare the live-events broadcaster" in caplog.text
