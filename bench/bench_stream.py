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

``full`` is the whole server path of a live frame, per frame per socket: the channel-layer message
deserialized as the Redis pub/sub layer does (msgpack), handed by the process's ``FanoutHub`` to
``--sockets`` sockets, each woken, its drain task sending through the websocket middleware stack of
``controlplane.asgi`` (cookies, session, user) into uvicorn's websocket protocol (``--ws``, each
implementation given is measured), which builds the websocket frame and writes it to a transport
that only counts bytes: everything but the kernel's share of the socket write, which
``bench_events.py``'s server CPU includes. One frame per wake-up: the quiet-server case, where every
frame costs every socket a wake-up.
The full-stack latency is ``bench_events.py``'s.

    .venv/bin/python bench/bench_stream.py [--frames 20000 --batch 10 --backlog 1000 --rounds 7]
        [--sockets 100 --full-frames 300 --ws websockets-sansio,websockets]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import time
import warnings
from typing import Any

from _common import emit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")

JOB = 1
STATE_CHANGE_EVERY = 25


class _User:
    is_authenticated = True
    pk = 1


class _Counter:
    """Counts frames sent; ``expect(n)`` resolves once ``n`` more were."""

    def __init__(self) -> None:
        self.frames = 0
        self.target = 0
        self.done: asyncio.Future[None] | None = None

    def expect(self, count: int) -> asyncio.Future[None]:
        self.target = self.frames + count
        self.done = asyncio.get_running_loop().create_future()
        return self.done

    def count(self) -> None:
        self.frames += 1
        if self.done is not None and self.frames >= self.target and not self.done.done():
            self.done.set_result(None)


class _CountingSend(_Counter):
    """The ASGI ``send`` of the server: counts websocket frames."""

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "websocket.send":
            self.count()


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


class _CountingTransport:
    """A connected TCP transport that writes nowhere, counting the writes."""

    def __init__(self, port: int, counter: _Counter) -> None:
        self.extra = {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", port)}
        self.counter = counter
        self.closing = False

    def write(self, data: bytes) -> None:
        self.counter.count()

    def writelines(self, chunks: Any) -> None:
        self.counter.count()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.extra.get(name, default)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None: ...

    def can_write_eof(self) -> bool:
        return False


HANDSHAKE = (
    b"GET /ws/events/ HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


async def _full(args: argparse.Namespace, ws: str) -> dict[str, Any]:
    """The ``full`` shape for one uvicorn websocket implementation: µs per frame per socket."""
    from channels.layers import get_channel_layer
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from apps.core.websocket import websocket_auth_stack
    from apps.events.consumers import EventsConsumer
    from apps.events.fanout import hub
    from apps.events.stream import Subscription

    # Each consumer's own channel (Channels' per-consumer receive) is cancelled at the end; its
    # clean-up complaints, and uvicorn's deprecation notice of ``--ws websockets``, are not results.
    logging.getLogger("channels_redis").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", module="uvicorn")
    opened: list[Any] = []

    class Consumer(EventsConsumer):
        async def connect(self) -> None:
            await super().connect()
            for task in self.tasks[1:]:  # keep the drain task; the periodic checks read the database
                task.cancel()
            opened.append(self)

    async def as_user(scope: Any, receive: Any, send: Any) -> Any:  # past the auth stack: a user
        return await Consumer.as_asgi()({**scope, "user": _User()}, receive, send)

    config = Config(
        app=websocket_auth_stack(as_user),
        ws=ws,
        ws_per_message_deflate=False,
        lifespan="off",
        log_level="warning",
    )
    config.load()
    assert config.ws_protocol_class is not None
    state = ServerState()
    counter = _Counter()
    protocols = []
    for index in range(args.sockets):
        protocol: Any = config.ws_protocol_class(config=config, server_state=state, app_state={})
        protocol.connection_made(_CountingTransport(40000 + index, counter))
        protocol.data_received(HANDSHAKE)
        protocols.append(protocol)
    deadline = time.monotonic() + 30
    while len(opened) < args.sockets:
        assert time.monotonic() < deadline, f"{len(opened)} of {args.sockets} sockets opened"
        await asyncio.sleep(0.01)
    fanout = hub()
    for consumer in opened:
        consumer.streams.subs[JOB] = Subscription(JOB, 0)
        fanout.followers.setdefault(JOB, set()).add(consumer.streams)
    layer: Any = get_channel_layer()
    rounds: list[float] = []
    seq = 0
    for _ in range(args.rounds):
        # What Redis hands the process: msgpack bytes, one per frame (the layer deserializes them).
        blobs = [layer.serialize(_message(seq + i + 1, "fault.detected")) for i in range(args.full_frames)]
        seq += args.full_frames
        done = counter.expect(args.full_frames * args.sockets)
        start = time.process_time()
        for blob in blobs:
            fanout.deliver(layer.deserialize(blob))
            await asyncio.sleep(0)  # the hub's receive loop yields; every socket drains its frame
        await asyncio.wait_for(done, 60)
        rounds.append((time.process_time() - start) / (args.full_frames * args.sockets) * 1e6)
    for consumer in opened:
        fanout.followers.get(JOB, set()).discard(consumer.streams)
        await consumer.disconnect(1000)
    for protocol in protocols:
        protocol.connection_lost(None)
    return {"ws": ws, "us_per_socket_frame": round(statistics.median(rounds), 2)}


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
    full = [await _full(args, ws) for ws in args.ws.split(",") if ws]
    return {
        "full_sockets": args.sockets,
        "full_frames_per_round": args.full_frames,
        "full_us_per_socket_frame": {row["ws"]: row["us_per_socket_frame"] for row in full},
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
    parser.add_argument("--sockets", type=int, default=100, help="sockets of the full shape")
    parser.add_argument("--full-frames", type=int, default=300, help="frames per round of the full shape")
    parser.add_argument(
        "--ws",
        default="websockets-sansio,websockets",
        help="uvicorn websocket implementations for the full shape, comma-separated (wsproto if installed)",
    )
    args = parser.parse_args()
    import django

    django.setup()
    try:  # the event loop uvicorn runs (``--loop auto`` picks uvloop when installed, as it is here)
        import uvloop
    except ImportError:
        emit(asyncio.run(_bench(args)))
    else:
        emit(uvloop.run(_bench(args)))


if __name__ == "__main__":
    main()
