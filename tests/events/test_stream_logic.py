"""The ``/ws/events/`` stream rules (design.md §4.3) on ``apps.events.stream`` alone: no Channels, no socket.

The three ports are small in-memory ones: ``StoredLog`` is the stored events of each job (what
``JobEvent.as_message()`` gives), ``Socket`` keeps every frame sent in order, ``Hub`` hands live
frames to the followers' inboxes as ``FanoutHub.deliver`` does. The same rules over the real ASGI
stack, Redis and PostgreSQL are ``tests/events/test_websocket.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import pytest

from apps.events import kinds
from apps.events.client_messages import (
    FollowAllJobs,
    FollowJob,
    Invalid,
    SubscribeBucket,
    UnfollowAllJobs,
    UnfollowJob,
    read_message,
)
from apps.events.stream import FrameSink, JobStreams, StreamLimits, Summaries

JOB = 7
NOW_NS = 1_800_000_000 * 10**9
LIMITS = StreamLimits(max_replay=10, max_lag_ns=5 * 10**9, coalesce_after=3)


class StoredLog:
    """The system of record: each job's events, seq 1..n, and a switch for "the database is away"."""

    def __init__(self) -> None:
        self.events: dict[int, list[dict[str, Any]]] = {}
        self.away = False
        self.reads_while: list[bool] = []  # for each read: was the job already followed?
        self.hub: Hub | None = None

    def store(self, job_id: int, count: int, kind: str = kinds.FAULT_DETECTED) -> list[dict[str, Any]]:
        rows = self.events.setdefault(job_id, [])
        new = [
            {"type": "event", "job": job_id, "seq": len(rows) + i + 1, "kind": kind, "message": "m"}
            for i in range(count)
        ]
        rows.extend(new)
        return new

    async def head_seq(self, job_id: int) -> int:
        self._read(job_id)
        return len(self.events.get(job_id, []))

    async def events_after(self, job_id: int, after_seq: int, limit: int) -> list[dict[str, Any]]:
        self._read(job_id)
        return [dict(row) for row in self.events.get(job_id, []) if row["seq"] > after_seq][:limit]

    def _read(self, job_id: int) -> None:
        if self.away:
            raise ConnectionError("database away")
        if self.hub is not None:
            self.reads_while.append(bool(self.hub.followers.get(job_id)))


class Socket:
    """Every frame sent, decoded, in order; ``texts`` counts those sent as the broadcaster encoded them."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.texts = 0

    async def text(self, text: str) -> None:
        self.texts += 1
        self.sent.append(json.loads(text))

    async def frame(self, frame: Mapping[str, Any]) -> None:
        self.sent.append(dict(frame))

    def take(self) -> list[dict[str, Any]]:
        sent, self.sent = self.sent, []
        return sent


class Hub:
    """Followers per job; ``deliver`` appends to their inboxes and wakes them, as ``FanoutHub`` does."""

    def __init__(self) -> None:
        self.followers: dict[int, set[JobStreams]] = {}

    async def follow(self, job_id: int, subscriber: JobStreams) -> None:
        self.followers.setdefault(job_id, set()).add(subscriber)

    async def unfollow(self, job_id: int, subscriber: JobStreams) -> None:
        self.followers.get(job_id, set()).discard(subscriber)

    def deliver(self, message: dict[str, Any]) -> None:
        for subscriber in tuple(self.followers.get(message["frame"]["job"], ())):
            subscriber.inbox.append(message)
            subscriber.wake()


def live(event: dict[str, Any], sent_ns: int = NOW_NS) -> dict[str, Any]:
    """What ``apps.events.broadcast.event_frame`` puts on the channel layer for a stored event."""
    return {
        "type": "events.event",
        "frame": {"job": event["job"], "seq": event["seq"], "kind": event["kind"]},
        "text": json.dumps(event, separators=(",", ":")),
        "sent_ns": sent_ns,
    }


class World:
    def __init__(self, limits: StreamLimits = LIMITS) -> None:
        self.log, self.socket, self.hub = StoredLog(), Socket(), Hub()
        self.log.hub = self.hub
        self.now_ns = NOW_NS
        self.streams = JobStreams(
            self.log, FrameSink(self.socket.text, self.socket.frame), self.hub, limits, lambda: self.now_ns
        )

    async def arrive(self, *events: dict[str, Any]) -> list[dict[str, Any]]:
        """These events' live frames reach the socket together (one inbox batch); what was sent."""
        for event in events:
            self.hub.deliver(live(event))
        await self.streams.drain()
        return self.socket.take()


def run(scenario: Callable[[World], Coroutine[Any, Any, None]], limits: StreamLimits = LIMITS) -> None:
    asyncio.run(scenario(World(limits)))


def seqs(frames: list[dict[str, Any]]) -> list[int]:
    assert all(frame["type"] == "event" for frame in frames), frames
    return [frame["seq"] for frame in frames]


def test_subscribe_follows_first_then_replays_after_the_seq() -> None:
    async def scenario(w: World) -> None:
        w.log.store(JOB, 5)
        await w.streams.subscribe(JOB, after_seq=2)
        assert seqs(w.socket.take()) == [3, 4, 5]
        # Every read of the log came after the hub had the socket: a frame stored meanwhile is queued.
        assert w.log.reads_while and all(w.log.reads_while)

    run(scenario)


def test_live_frames_after_the_replay_without_duplicate() -> None:
    async def scenario(w: World) -> None:
        w.log.store(JOB, 3)
        await w.streams.subscribe(JOB, after_seq=0)
        assert seqs(w.socket.take()) == [1, 2, 3]
        # Frames 2 and 3 were broadcast during the replay, so they are queued too: sent once only.
        (event4,) = w.log.store(JOB, 1)
        sent = await w.arrive(w.log.events[JOB][1], w.log.events[JOB][2], event4)
        assert seqs(sent) == [4]
        assert w.socket.texts == 1  # the broadcaster's encoding, sent as is

    run(scenario)


def test_a_gap_is_filled_from_the_log_in_order() -> None:
    async def scenario(w: World) -> None:
        await w.streams.subscribe(JOB, after_seq=0)
        w.log.store(JOB, 3)  # frames 1-3 lost (a full channel, a Redis restart)
        (event4,) = w.log.store(JOB, 1)
        assert seqs(await w.arrive(event4)) == [1, 2, 3, 4]
        (event5,) = w.log.store(JOB, 1)
        assert seqs(await w.arrive(event5)) == [5]

    run(scenario)


def test_too_much_to_replay_gets_resync_and_stops_the_stream() -> None:
    async def scenario(w: World) -> None:
        w.log.store(JOB, 30)
        await w.streams.subscribe(JOB, after_seq=5)
        assert w.socket.take() == [{"type": "resync", "job": JOB, "from_seq": 5, "to_seq": 30}]
        assert not w.streams.follows(JOB) and not w.hub.followers[JOB]
        # The client pages over REST and subscribes again from where it got to.
        await w.streams.subscribe(JOB, after_seq=25)
        assert seqs(w.socket.take()) == [26, 27, 28, 29, 30]

    run(scenario)


def test_a_gap_larger_than_the_replay_limit_gets_resync() -> None:
    async def scenario(w: World) -> None:
        await w.streams.subscribe(JOB, after_seq=0)
        w.log.store(JOB, 20)
        (event21,) = w.log.store(JOB, 1)
        assert await w.arrive(event21) == [{"type": "resync", "job": JOB, "from_seq": 0, "to_seq": 21}]

    run(scenario)


async def settle() -> None:
    """Let every ready task run to its next wait (yields to the loop, no wall-clock time)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_the_drain_task_misses_no_wake_up() -> None:
    """The socket's drain task (``drain_forever``): frames delivered while it waits, and while it is
    stuck in a send (a browser that reads slowly), all go out in order, each once."""

    async def scenario() -> None:
        log, hub = StoredLog(), Hub()
        sent: list[int] = []
        unblock = asyncio.Event()

        async def text(raw: str) -> None:
            if not sent:
                await unblock.wait()  # the first send waits for the socket to drain
            sent.append(json.loads(raw)["seq"])

        async def frame(data: Mapping[str, Any]) -> None:
            raise AssertionError(f"only live frames expected, got {data}")

        sink = FrameSink(text, frame)
        streams = JobStreams(log, sink, hub, LIMITS, lambda: NOW_NS)
        await streams.subscribe(JOB, after_seq=0)
        task = asyncio.ensure_future(streams.drain_forever())
        try:
            first, second, third = log.store(JOB, 3)
            hub.deliver(live(first))  # wakes the waiting task, whose send then blocks
            await settle()
            assert sent == []
            hub.deliver(live(second))  # while the task is busy: must not be lost
            unblock.set()
            await settle()
            assert sent == [1, 2]
            hub.deliver(live(third))  # the task waits again: woken again
            await settle()
            assert sent == [1, 2, 3]
        finally:
            task.cancel()

    asyncio.run(scenario())


def test_frames_that_arrive_too_late_get_resync_and_the_backlog_is_dropped() -> None:
    async def scenario(w: World) -> None:
        await w.streams.subscribe(JOB, after_seq=0)
        events = w.log.store(JOB, 2)
        for event in events:
            w.hub.deliver(live(event, sent_ns=NOW_NS))
        w.now_ns = NOW_NS + LIMITS.max_lag_ns + 1  # the browser could not keep up
        await w.streams.drain()
        assert w.socket.take() == [{"type": "resync", "job": JOB, "from_seq": 0, "to_seq": 2}]
        assert not w.streams.follows(JOB)

    run(scenario)


def test_a_backlog_coalesces_reports_but_never_state_changes() -> None:
    async def scenario(w: World) -> None:
        await w.streams.subscribe(JOB, after_seq=0)
        backlog = w.log.store(JOB, 5) + w.log.store(JOB, 1, kinds.STRATEGY_CHOSEN) + w.log.store(JOB, 4)
        sent = await w.arrive(*backlog)
        assert sent[0] == {
            "type": "coalesced",
            "job": JOB,
            "from_seq": 1,
            "to_seq": 5,
            "count": 5,
            "kinds": {kinds.FAULT_DETECTED: 5},
        }
        assert (sent[1]["type"], sent[1]["seq"], sent[1]["kind"]) == ("event", 6, kinds.STRATEGY_CHOSEN)
        assert (sent[2]["type"], sent[2]["from_seq"], sent[2]["to_seq"], sent[2]["count"]) == (
            "coalesced",
            7,
            10,
            4,
        )
        assert len(sent) == 3
        # Below the threshold, frames go out one by one again, continuing the seq.
        assert seqs(await w.arrive(*w.log.store(JOB, 1))) == [11]

    run(scenario)


def test_a_run_of_one_report_is_sent_as_itself() -> None:
    async def scenario(w: World) -> None:
        await w.streams.subscribe(JOB, after_seq=0)
        reports_and_changes = (
            w.log.store(JOB, 1)
            + w.log.store(JOB, 1, kinds.JOB_PHASE_CHANGED)
            + w.log.store(JOB, 1, kinds.JOB_WARNING)
        )
        assert seqs(await w.arrive(*reports_and_changes)) == [1, 2, 3]

    run(scenario)


def test_a_coalesced_range_never_spans_a_gap() -> None:
    async def scenario(w: World) -> None:
        await w.streams.subscribe(JOB, after_seq=0)
        first = w.log.store(JOB, 3)
        w.log.store(JOB, 1)  # seq 4: its frame is lost
        later = w.log.store(JOB, 3)
        sent = await w.arrive(*first, *later)
        assert (sent[0]["type"], sent[0]["from_seq"], sent[0]["to_seq"]) == ("coalesced", 1, 3)
        # At seq 5 the gap is seen: everything stored after 3 comes from the log, one by one, and
        # the queued live frames 6 and 7 are then duplicates.
        assert seqs(sent[1:]) == [4, 5, 6, 7]

    run(scenario)


def test_the_periodic_check_repairs_a_lost_last_frame() -> None:
    async def scenario(w: World) -> None:
        await w.streams.subscribe(JOB, after_seq=0)
        w.log.store(JOB, 2)  # both frames lost; nothing later reveals the gap
        w.streams.check_head(JOB, 2)
        # Stored after the previous check (there was none): probably still on its way, so wait.
        assert not w.streams.inbox
        w.streams.check_head(JOB, 2)
        assert list(w.streams.inbox) == [{"type": "repair", "job": JOB, "upto": 2}]
        await w.streams.drain()
        assert seqs(w.socket.take()) == [1, 2]
        w.streams.check_head(JOB, 2)
        assert not w.streams.inbox  # nothing overdue any more

    run(scenario)


def test_the_log_briefly_away_loses_nothing() -> None:
    async def scenario(w: World) -> None:
        await w.streams.subscribe(JOB, after_seq=0)
        w.log.store(JOB, 1)  # lost
        (event2,) = w.log.store(JOB, 1)
        w.log.away = True
        assert await w.arrive(event2) == []  # the drain survives; nothing sent out of order
        w.log.away = False
        w.streams.check_head(JOB, 2)
        w.streams.check_head(JOB, 2)
        await w.streams.drain()
        assert seqs(w.socket.take()) == [1, 2]

    run(scenario)


def test_unsubscribe_keep_only_and_close_unfollow() -> None:
    async def scenario(w: World) -> None:
        for job_id in (1, 2, 3):
            await w.streams.subscribe(job_id, after_seq=0)
        await w.streams.unsubscribe(1)
        assert w.streams.jobs == [2, 3]
        assert await w.streams.keep_only({3}, checked={2, 3}) == [2]
        (event,) = w.log.store(2, 1)
        w.hub.deliver(live(event))  # no longer followed: the hub does not queue it
        assert not w.streams.inbox
        await w.streams.close()
        assert w.streams.jobs == [] and not any(w.hub.followers.values())

    run(scenario)


def test_keep_only_spares_a_job_subscribed_while_access_was_rechecked() -> None:
    """The access recheck asks the database about the jobs followed when it starts; a job subscribed
    meanwhile was not asked about (its subscribe checked it) and must keep streaming."""

    async def scenario(w: World) -> None:
        await w.streams.subscribe(1, after_seq=0)
        checked = set(w.streams.jobs)  # the recheck starts: asks about job 1 only
        await w.streams.subscribe(2, after_seq=0)  # lands while the database answers
        assert await w.streams.keep_only({1}, checked=checked) == []
        assert w.streams.jobs == [1, 2]
        (event,) = w.log.store(2, 1)
        assert seqs(await w.arrive(event)) == [1]

    run(scenario)


def test_frames_of_a_job_no_longer_followed_are_not_sent() -> None:
    async def scenario(w: World) -> None:
        await w.streams.subscribe(JOB, after_seq=0)
        (event,) = w.log.store(JOB, 1)
        w.hub.deliver(live(event))  # queued before the unsubscribe
        await w.streams.unsubscribe(JOB)
        await w.streams.drain()
        assert w.socket.take() == []

    run(scenario)


def test_summaries_of_visible_jobs_newest_wins_once_per_flush() -> None:
    socket = Socket()
    summaries = Summaries(FrameSink(socket.text, socket.frame))

    def summary(job_id: int, last_seq: int) -> dict[str, Any]:
        return {"type": "job", "job": job_id, "last_seq": last_seq}

    async def scenario() -> None:
        summaries.offer(summary(1, 1))  # not following yet
        summaries.start({1, 2})
        for last_seq in range(1, 21):
            summaries.offer(summary(1, last_seq))
        summaries.offer(summary(3, 5))  # not visible to this user
        await summaries.flush()
        assert socket.take() == [summary(1, 20)]
        await summaries.flush()
        assert socket.take() == []
        summaries.offer(summary(2, 1))
        summaries.stop()
        await summaries.flush()
        assert socket.take() == []

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("content", "subscribes", "request_"),
    [
        ({"subscribe": {"job": 3, "after_seq": 9}}, True, FollowJob(3, 9)),
        ({"subscribe": {"job": 3}}, True, FollowJob(3, 0)),
        ({"unsubscribe": {"job": 3}}, False, UnfollowJob(3)),
        ({"subscribe": {"jobs": "all"}}, True, FollowAllJobs()),
        ({"unsubscribe": {"jobs": "all"}}, False, UnfollowAllJobs()),
        ([1, 2], False, Invalid("expected one of {'subscribe': ...} or {'unsubscribe': ...}")),
        (
            {"subscribe": {}, "unsubscribe": {}},
            False,
            Invalid("expected one of {'subscribe': ...} or {'unsubscribe': ...}"),
        ),
        (
            {"hello": {}},
            False,
            Invalid("unknown message 'hello'; expected 'subscribe' or 'unsubscribe' with an object"),
        ),
        (
            {"subscribe": 3},
            False,
            Invalid("unknown message 'subscribe'; expected 'subscribe' or 'unsubscribe' with an object"),
        ),
        (
            {"subscribe": {"job": "7"}},
            True,
            Invalid("'job' must be a positive integer job id", {"field": "job"}),
        ),
        (
            {"unsubscribe": {"job": True}},
            False,
            Invalid("'job' must be a positive integer job id", {"field": "job"}),
        ),
        (
            {"subscribe": {"job": 0}},
            True,
            Invalid("'job' must be a positive integer job id", {"field": "job"}),
        ),
        (
            {"subscribe": {"job": 1, "after_seq": -1}},
            True,
            Invalid("'after_seq' must be an integer ≥ 0", {"field": "after_seq", "job": 1}),
        ),
    ],
)
def test_client_messages(content: Any, subscribes: bool, request_: object) -> None:
    message = read_message(content)
    assert (message.subscribes, message.request) == (subscribes, request_)


def test_subscribe_bucket_allows_a_burst_then_the_rate() -> None:
    now = [100.0]
    bucket = SubscribeBucket(burst=2, rate=1.0, clock=lambda: now[0])
    assert bucket.take() is None and bucket.take() is None
    assert bucket.take() == pytest.approx(1.0)  # retry_after
    now[0] += 0.5
    assert bucket.take() == pytest.approx(0.5)
    now[0] += 0.5
    assert bucket.take() is None
    now[0] += 60
    assert [bucket.take() for _ in range(3)] == [None, None, pytest.approx(1.0)]  # up to the burst only
