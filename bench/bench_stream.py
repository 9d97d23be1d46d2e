"""Per-frame server cost of the live-events stream (issue #22, item 5): no network, no database, no Redis.

One ``EventsConsumer`` is opened on an ASGI ``send`` that only counts frames, follows one job, and the
benchmark puts live frames into its inbox the way the process's ``FanoutHub`` does, then waits until
the drain task has sent them. Two shapes:

- ``live``: batches of ``--batch`` in-order frames (below ``EVENTS_WS_COALESCE_AFTER``), each frame
  sent as itself: the steady path;
- ``backlog``: ``--backlog`` frames at once (fault reports with a state change every 25), which the
  stream coalesces: the path of a socket that has fallen behind.

Reports the median over ``--rounds`` of the CPU µs per input frame (``time.process_time``, so other
work on the machine hardly moves it): the Python work between the hub and the ASGI ``send`` (seq
bookkeeping, coalescing, the consumer's send). ``stream_alone`` is the same live frames through
``apps.events.stream.JobStreams`` alone, sent nowhere: the stream logic's share.
The full-stack latency is ``bench_events.py``'s.

    .venv/bin/python bench/bench_stream.py [--frames 20000 --batch 10 --backlog 1000 --rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from typing import Any

from _common import emit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")

JOB = 1
STATE_CHANGE_EVERY = 25


class _User:
    is_authenticated = True
    pk = 1


class _CountingSend:
    """The ASGI ``send`` of the server: counts websocket frames, resolves when ``target`` is reached."""

    def __init__(self) -> None:
        self.frames = 0
        self.target = 0
        self.done: asyncio.Future[None] | None = None

    def expect(self, count: int) -> asyncio.Future[None]:
        self.target = self.frames + count
        self.done = asyncio.get_running_loop().create_future()
        return self.done

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] != "websocket.send":
            return
        self.frames += 1
        if self.done is not None and self.frames >= self.target and not self.done.done():
            self.done.set_result(None)


def _message(seq: int, kind: str) -> dict[str, Any]:
    """What ``broadcast.event_frame`` puts on the channel layer, built without a database row."""
    frame = {"type": "event", "job": JOB, "seq": seq, "kind": kind, "message": f"bench {seq}", "data": {}}
    return {
        "type": "events.event",
        "frame": {"job": JOB, "seq": seq, "kind": kind},
        "text": json.dumps(frame, separators=(",", ":")),
        "sent_ns": time.time_ns(),
    }


async def _open() -> tuple[Any, _CountingSend]:
    from apps.events.consumers import EventsConsumer

    consumer: Any = EventsConsumer()  # driven by hand: no ASGI server, scope and send set here
    send = _CountingSend()
    consumer.scope = {"type": "websocket", "user": _User()}
    consumer.base_send = send
    await consumer.connect()
    # connect() starts the drain task first; the others are periodic checks that read the database.
    for task in consumer.tasks[1:]:
        task.cancel()
    _follow(consumer, JOB)
    return consumer, send


def _follow(consumer: Any, job_id: int) -> None:
    """Follow ``job_id`` from seq 0 without the database or the hub (the subscribe path is not timed)."""
    from apps.events.stream import Subscription

    consumer.streams.subs[job_id] = Subscription(job_id, 0)


async def _run(
    consumer: Any, send: _CountingSend, messages: list[dict[str, Any]], batch: int, expected: int
) -> float:
    """Seconds to hand ``messages`` to the socket in batches of ``batch`` and see ``expected`` frames sent."""
    inbox, wake = consumer.streams.inbox, consumer.streams.wake
    done = send.expect(expected)
    start = time.process_time()
    for first in range(0, len(messages), batch):
        inbox.extend(messages[first : first + batch])
        wake()
        await asyncio.sleep(0)  # let the drain task run, as the hub's receive loop would
    await asyncio.wait_for(done, 30)
    return time.process_time() - start


class _Unused:
    """The log and the hub of a stream that is never behind: in-order frames need neither."""

    async def head_seq(self, job_id: int) -> int:
        raise AssertionError("an in-order stream does not read the log")

    async def events_after(self, job_id: int, after_seq: int, limit: int) -> list[dict[str, Any]]:
        raise AssertionError("an in-order stream does not read the log")

    async def follow(self, job_id: int, subscriber: Any) -> None: ...

    async def unfollow(self, job_id: int, subscriber: Any) -> None: ...


async def _discard(frame: Any) -> None:
    return None


async def _stream_alone(messages: list[dict[str, Any]], batch: int) -> float:
    """Seconds for ``JobStreams`` alone to take ``messages`` in batches and send them nowhere: the
    stream logic's share of the consumer's cost."""
    from apps.events.consumers import stream_limits
    from apps.events.stream import FrameSink, JobStreams, Subscription

    streams = JobStreams(_Unused(), FrameSink(_discard, _discard), _Unused(), stream_limits())
    streams.subs[JOB] = Subscription(JOB, messages[0]["frame"]["seq"] - 1)
    start = time.process_time()
    for first in range(0, len(messages), batch):
        streams.inbox.extend(messages[first : first + batch])
        await streams.drain()
    assert streams.subs[JOB].last_sent == messages[-1]["frame"]["seq"]
    return time.process_time() - start


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    from django.conf import settings

    consumer, send = await _open()
    seq = 0
    live_us: list[float] = []
    backlog_us: list[float] = []
    alone_us: list[float] = []
    assert args.batch < settings.EVENTS_WS_COALESCE_AFTER <= args.backlog
    for _ in range(args.rounds):
        live = [_message(seq + i + 1, "fault.detected") for i in range(args.frames)]
        seq += args.frames
        live_us.append(await _run(consumer, send, live, args.batch, len(live)) / len(live) * 1e6)
        alone_us.append(await _stream_alone(live, args.batch) / len(live) * 1e6)
        backlog = [
            _message(
                seq + i + 1, "strategy.chosen" if (i + 1) % STATE_CHANGE_EVERY == 0 else "fault.detected"
            )
            for i in range(args.backlog)
        ]
        seq += args.backlog
        # Runs of 24 reports → one ``coalesced`` frame each, plus the state change as itself.
        changes = args.backlog // STATE_CHANGE_EVERY
        expected = changes * 2 + (1 if args.backlog % STATE_CHANGE_EVERY else 0)
        backlog_us.append(await _run(consumer, send, backlog, args.backlog, expected) / len(backlog) * 1e6)
    await consumer.disconnect(1000)
    return {
        "bench": "stream",
        "frames_per_round": args.frames,
        "batch": args.batch,
        "backlog": args.backlog,
        "rounds": args.rounds,
        "live_us_per_frame": round(statistics.median(live_us), 2),
        "backlog_us_per_frame": round(statistics.median(backlog_us), 2),
        "stream_alone_live_us_per_frame": round(statistics.median(alone_us), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=20_000, help="live frames per round")
    parser.add_argument("--batch", type=int, default=10, help="live frames per hub wake-up")
    parser.add_argument("--backlog", type=int, default=1000, help="frames of the coalesced backlog")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    import django

    django.setup()
    emit(asyncio.run(_bench(args)))


if __name__ == "__main__":
    main()
