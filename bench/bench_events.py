"""Live-events benchmark (issue #6, anchors G1 / G1b).

Steady: R events/s (default 200) for --duration seconds (default 300) stored through ``event_record``
(store first, broadcast after commit) to N open sockets (default 100) that each receive every event
→ event-to-client latency p50 / p99 (goals ≤ 50 ms / ≤ 250 ms) and seq gaps (goal 0).
Burst: 8,000 events in 5 s → all stored, and every client consistent (its last seq per job equals the
database's) within 5 s of the burst's end (clients too far behind get ``resync`` and page over REST).
Floor, measured in the same run against the same sockets and server: raw channels-redis
``group_send`` of the same frames at the same rate (no database, no broadcast thread).

Everything runs on this machine: PostgreSQL (a ``bench_events`` database created and dropped here),
a private redis-server, uvicorn serving ``controlplane.asgi:application``, one client process
(asyncio ``websockets``), and producer processes. Same-host ``time.time_ns()`` stamps avoid skew.

``--workers N`` runs N uvicorn processes, each on its own port (as N web pods behind a Service), over
the same Redis channel layer; socket i connects to server i mod N, so each process has its own
``FanoutHub`` and its own share of the sockets. Server CPU is summed over the N processes and also
given per delivered frame (``server_cpu_us_per_frame``: CPU seconds of the phase / frames the clients
received in it). Gaps: a socket's seq must go up by exactly one per ``event`` frame (or continue at a
``coalesced`` frame's ``from_seq``); after the steady phase every socket must reach each job's stored
head (``steady.behind_at_end``, sockets x jobs still short of it 30 s later).

    .venv/bin/python bench/bench_events.py [--duration 300 --rate 200 --sockets 100 --jobs 4 --workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import Any

from _common import (
    REPO,
    create_database,
    emit,
    free_port,
    fresh_database,
    percentile,
    product_env,
    spawn,
    start_redis,
    stop_all,
    uvicorn_argv,
    wait_port,
)

VAR = REPO / "var" / "bench"


# --- producer process -------------------------------------------------------------------------------
def produce(
    job_ids: list[int], rate: float, count: int, mode: str, phase: str, report: Path, start_at: float = 0.0
) -> None:
    """Open loop: event i is due at start + i / rate (a late event is sent at once, never skipped).

    ``start_at`` (epoch seconds): every producer of a phase starts at that moment, after Django is
    set up, so the burst is the burst and not the interpreters starting.
    """
    import django

    django.setup()
    from apps.events import broadcast
    from apps.events.services import NewEvent, event_record_many
    from apps.jobs.models import TrainingJob

    jobs = list(TrainingJob.objects.filter(pk__in=job_ids).order_by("pk"))
    # As a long-running ingester has: the channel layer built before the clock starts (the floor's
    # producer builds its own before its clock too).
    broadcast.warm()
    if start_at:
        time.sleep(max(0.0, start_at - time.time()))
    start, wall0 = time.monotonic(), time.time_ns()
    stored_ns: list[int] = []
    if mode == "floor":
        asyncio.run(produce_floor([j.pk for j in jobs], rate, count, phase, stored_ns))
        finished_at = time.time()
    else:
        # Open loop: event i is due at start + i / rate. Whatever is due is stored at once, one
        # ``event_record_many`` per job (one transaction), as a source that has fallen behind would;
        # at a steady rate that is one event at a time through the same call.
        i = 0
        while i < count:
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            due = min(count, max(i + 1, int((time.monotonic() - start) * rate) + 1))
            t0 = time.time_ns()
            per_job: dict[int, list[NewEvent]] = {}
            for n in range(i, due):
                per_job.setdefault(n % len(jobs), []).append(
                    NewEvent(
                        kind="fault.detected",
                        message=f"bench {n}",
                        source="bench",
                        # Latency counts from when the event was due, so a producer that fell
                        # behind cannot hide its delay (no coordinated omission).
                        data={"t0_ns": wall0 + int(n / rate * 1e9), "phase": phase},
                    )
                )
            for index, batch in per_job.items():
                event_record_many(job=jobs[index], events=batch)
            stored_ns.extend([time.time_ns() - t0] * (due - i))
            i = due
        finished_at = time.time()  # the last event is stored (its frames may still be in flight)
        broadcast.flush(30)
    elapsed = time.monotonic() - start
    store_ms = summary_ms(stored_ns)
    summary = {"elapsed": elapsed, "count": count, "finished_at": finished_at, "store_ms": store_ms}
    report.write_text(json.dumps(summary))


async def produce_floor(job_ids: list[int], rate: float, count: int, phase: str, sent_ns: list[int]) -> None:
    """The floor: the same frames through a bare channels-redis ``group_send``, no database."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    assert layer is not None, "CHANNEL_LAYERS has no default layer"
    # Floor frames must continue each job's seq across producer runs, or the consumer drops them.
    state = VAR / "floor-seqs.json"
    saved = json.loads(state.read_text()) if state.exists() else {}
    seqs = {job: int(saved.get(str(job), 0)) for job in job_ids}
    start = time.monotonic()
    for i in range(count):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        job = job_ids[i % len(job_ids)]
        seqs[job] += 1
        t0 = time.time_ns()
        frame = {
            "type": "event",
            "job": job,
            "seq": seqs[job],
            "kind": "fault.detected",
            "data": {"t0_ns": t0, "phase": phase},
        }
        message = {
            "type": "events.event",
            "frame": {"job": job, "seq": seqs[job], "kind": "fault.detected"},
            "text": json.dumps(frame, separators=(",", ":")),  # encoded once, as the broadcaster does
        }
        await layer.group_send(f"job-{job}", message)
        sent_ns.append(time.time_ns() - t0)
    state.write_text(json.dumps({str(job): seq for job, seq in seqs.items()}))


def summary_ms(values_ns: list[int]) -> dict[str, float]:
    ms = [v / 1e6 for v in values_ns]
    return {"p50": round(percentile(ms, 50), 2), "p99": round(percentile(ms, 99), 2)}


# --- client process ---------------------------------------------------------------------------------
class Stats:
    def __init__(self) -> None:
        self.latency: dict[str, array[float]] = {}
        self.gaps: dict[str, int] = {}
        self.dups = 0
        self.resyncs = 0
        self.errors: dict[str, int] = {}  # error frames by code (a refused subscribe would hide here)
        self.rest_events = 0
        self.frames = 0
        self.coalesced_frames = 0
        self.coalesced_events = 0

    def add(self, phase: str, ms: float) -> None:
        self.latency.setdefault(phase, array("d")).append(ms)


async def client_main(args: argparse.Namespace) -> None:
    import aiohttp
    from websockets.asyncio.client import connect
    from websockets.typing import Origin

    jobs: list[int] = [int(j) for j in args.job_ids.split(",")]
    stats = Stats()
    last: list[dict[int, int]] = [dict.fromkeys(jobs, 0) for _ in range(args.sockets)]
    connected = 0
    sockets: set[Any] = set()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    ports = [int(port) for port in args.ports.split(",")]
    headers = {"Authorization": f"Token {args.token}"}

    async def page_rest(
        session: aiohttp.ClientSession, origin: str, job: int, after: int, upto: int
    ) -> list[int]:
        seqs: list[int] = []
        while after < upto:
            url = f"{origin}/api/v1/jobs/{job}/events/?after_seq={after}&limit=500"
            async with session.get(url, headers=headers) as response:
                body = await response.json()
            page = [row["seq"] for row in body["results"]]
            if not page:
                break
            seqs += page
            after = page[-1]
        return seqs

    async def run_socket(index: int) -> None:
        nonlocal connected
        mine = last[index]
        port = ports[index % len(ports)]  # spread over the server processes
        origin = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:
            while not stop.is_set():
                try:
                    async with connect(
                        f"ws://127.0.0.1:{port}/ws/events/",
                        origin=Origin(origin),
                        additional_headers=headers,
                        max_queue=None,
                        open_timeout=30,
                    ) as ws:
                        for job in jobs:
                            await ws.send(json.dumps({"subscribe": {"job": job, "after_seq": mine[job]}}))
                        connected += 1
                        sockets.add(ws)
                        # ``async for``: no timeout task per frame (the orchestrator's stop closes the
                        # socket), so the client spends its share of the 2 cores on receiving.
                        async for raw in ws:
                            now = time.time_ns()
                            frame = json.loads(raw)
                            stats.frames += 1
                            if frame["type"] == "event":
                                job, seq = frame["job"], frame["seq"]
                                phase = frame.get("data", {}).get("phase", "?")
                                if seq <= mine[job]:
                                    stats.dups += 1
                                    continue
                                if seq != mine[job] + 1:
                                    stats.gaps[phase] = stats.gaps.get(phase, 0) + 1
                                mine[job] = seq
                                stats.add(phase, (now - frame["data"]["t0_ns"]) / 1e6)
                            elif frame["type"] == "coalesced":
                                # A run of fault reports in one frame: the client knows their exact
                                # seqs (it may page them over REST); its position moves to to_seq.
                                job = frame["job"]
                                if frame["from_seq"] != mine[job] + 1:
                                    stats.gaps["coalesced"] = stats.gaps.get("coalesced", 0) + 1
                                stats.coalesced_frames += 1
                                stats.coalesced_events += frame["count"]
                                mine[job] = frame["to_seq"]
                            elif frame["type"] == "error":
                                code = str(frame.get("code", "?"))
                                stats.errors[code] = stats.errors.get(code, 0) + 1
                                print(f"socket {index}: error frame {frame}", file=sys.stderr)
                            elif frame["type"] == "resync":
                                stats.resyncs += 1
                                job = frame["job"]
                                got = await page_rest(
                                    session, origin, job, frame["from_seq"], frame["to_seq"]
                                )
                                stats.rest_events += len(got)
                                if got:
                                    mine[job] = got[-1]
                                await ws.send(json.dumps({"subscribe": {"job": job, "after_seq": mine[job]}}))
                        sockets.discard(ws)
                        connected -= 1
                except Exception as exc:
                    if stop.is_set():
                        return
                    print(f"socket {index}: {exc.__class__.__name__}: {exc}", file=sys.stderr)
                    await asyncio.sleep(0.5)

    async def progress() -> None:
        path = Path(args.progress)
        while not stop.is_set():
            low = {job: min(sock[job] for sock in last) for job in jobs}
            lasts = {job: [sock[job] for sock in last] for job in jobs}  # each socket's position
            path.write_text(
                json.dumps({"connected": connected, "min_last": low, "lasts": lasts, "frames": stats.frames})
            )
            await asyncio.sleep(0.1)

    tasks = [asyncio.ensure_future(run_socket(i)) for i in range(args.sockets)]
    tasks.append(asyncio.ensure_future(progress()))
    await stop.wait()
    for ws in list(sockets):
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(), 2)
    _, pending = await asyncio.wait(tasks, timeout=10)
    for task in pending:  # sockets still paging over REST or closing: their counts are already in
        task.cancel()
    Path(args.result).write_text(
        json.dumps(
            {
                "latency": {phase: list(values) for phase, values in stats.latency.items()},
                "gaps": stats.gaps,
                "dups": stats.dups,
                "resyncs": stats.resyncs,
                "errors": stats.errors,
                "silent_sockets": sum(1 for sock in last if not any(sock.values())),
                "rest_events": stats.rest_events,
                "frames": stats.frames,
                "coalesced_frames": stats.coalesced_frames,
                "coalesced_events": stats.coalesced_events,
            }
        )
    )


# --- orchestrator ---------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_progress(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def run_producers(
    jobs: list[int],
    total_rate: float,
    seconds: float,
    mode: str,
    phase: str,
    processes: int,
    env: dict[str, str],
    start_at: float = 0.0,
) -> list[dict[str, Any]]:
    groups = [jobs[i::processes] for i in range(processes)]
    procs = []
    reports = []
    for index, group in enumerate(groups):
        report = VAR / f"producer-{phase}-{index}.json"
        report.unlink(missing_ok=True)
        reports.append(report)
        count = int(total_rate * seconds / processes)
        procs.append(
            spawn(
                [
                    sys.executable,
                    __file__,
                    "--role",
                    "producer",
                    "--job-ids",
                    ",".join(map(str, group)),
                    "--rate",
                    str(total_rate / processes),
                    "--count",
                    str(count),
                    "--mode",
                    mode,
                    "--phase",
                    phase,
                    "--report",
                    str(report),
                    "--start-at",
                    str(start_at),
                ],
                cwd=REPO,
                env=env,
            )
        )
    for proc in procs:
        proc.wait()
    return [json.loads(r.read_text()) for r in reports if r.exists()]


def lat_summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 50), 2),
        "p99_ms": round(percentile(values, 99), 2),
        "max_ms": round(max(values), 2) if values else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--role", default="orchestrator", choices=["orchestrator", "producer", "clients"])
    parser.add_argument("--duration", type=float, default=300.0, help="steady phase seconds")
    parser.add_argument(
        "--floor-seconds", type=float, default=0.0, help="floor phase seconds (0 = min(60, duration))"
    )
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--sockets", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--burst", type=int, default=8000, help="events of the burst phase (0: no burst)")
    parser.add_argument("--burst-seconds", type=float, default=5.0)
    parser.add_argument("--burst-producers", type=int, default=4)
    parser.add_argument(
        "--workers", type=int, default=1, help="uvicorn processes, one per port, sockets spread over them"
    )
    parser.add_argument("--ws", default="websockets-sansio", help="uvicorn websocket implementation")
    # internal (producer / clients roles)
    parser.add_argument("--job-ids", default="")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--mode", default="store")
    parser.add_argument("--phase", default="steady")
    parser.add_argument("--report", default="")
    parser.add_argument("--start-at", type=float, default=0.0)
    parser.add_argument("--ports", default="")
    parser.add_argument("--token", default="")
    parser.add_argument("--progress", default="")
    parser.add_argument("--result", default="")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")
    if args.role == "producer":
        produce(
            [int(j) for j in args.job_ids.split(",")],
            args.rate,
            args.count,
            args.mode,
            args.phase,
            Path(args.report),
            args.start_at,
        )
        return
    if args.role == "clients":
        asyncio.run(client_main(args))
        return
    orchestrate(args)


def orchestrate(args: argparse.Namespace) -> None:
    VAR.mkdir(parents=True, exist_ok=True)
    database_url = fresh_database("bench_events")
    redis_proc, redis_url = start_redis()
    env = product_env(database_url, REDIS_URL=redis_url, CHANNEL_LAYER_URL=redis_url, DEBUG="false")
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.accounts.services import token_issue
    from apps.events.models import JobEvent
    from apps.jobs.models import Cluster, TrainingJob

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_superuser("bench", password="bench-password")
    _, token = token_issue(user, "bench")
    cluster = Cluster.objects.create(name="bench")
    real = [
        TrainingJob.objects.create(cluster=cluster, namespace="bench", name=f"job-{i}").pk
        for i in range(args.jobs)
    ]
    floor = [
        TrainingJob.objects.create(cluster=cluster, namespace="bench", name=f"floor-{i}").pk
        for i in range(args.jobs)
    ]
    ports = [free_port() for _ in range(args.workers)]
    procs: list[subprocess.Popen[bytes]] = [redis_proc]
    progress, result = VAR / "events-progress.json", VAR / "events-result.json"
    # One stored event per job before the sockets connect: each subscribe replays it, so a socket
    # that has seq 1 of every job had all its subscribes processed (the server sends no other ack).
    # Without this gate a subscribe processed after the floor started would see a floor frame ahead
    # of the log (floor frames are never stored) as a gap it can never fill, and ask the database
    # on every later frame. The floor continues each floor job's seq from 1.
    from apps.events.services import NewEvent, event_record_many

    for job in TrainingJob.objects.filter(pk__in=real + floor):
        data = {"phase": "seed", "t0_ns": time.time_ns()}
        event_record_many(job=job, events=[NewEvent("fault.detected", "seed", "bench", data=data)])
    (VAR / "floor-seqs.json").write_text(json.dumps(dict.fromkeys(map(str, floor), 1)))
    progress.unlink(missing_ok=True)
    result.unlink(missing_ok=True)
    out: dict[str, Any] = {
        "bench": "events",
        "rate": args.rate,
        "sockets": args.sockets,
        "jobs": args.jobs,
        "duration_s": args.duration,
        "server_workers": args.workers,
        "ws_impl": args.ws,
        "cores": os.cpu_count(),
        "load_average_at_start": list(os.getloadavg()),
    }
    try:
        servers = []
        for port in ports:
            # One uvicorn process per port (``--workers 1``): N processes as N pods would run them.
            servers.append(
                spawn(
                    uvicorn_argv(
                        port,
                        1,
                        "--ws",
                        args.ws,
                        # Frames are ~400 B JSON: compressing each one for each socket costs more CPU
                        # than it saves on loopback or a LAN (py-spy: PerMessageDeflate.encode was the
                        # top frame).
                        "--ws-per-message-deflate",
                        "false",
                    ),
                    cwd=REPO,
                    env=env,
                )
            )
        procs.extend(servers)
        for port in ports:
            wait_port(port)
        clients = spawn(
            [
                sys.executable,
                __file__,
                "--role",
                "clients",
                "--ports",
                ",".join(map(str, ports)),
                "--token",
                token,
                "--job-ids",
                ",".join(map(str, real + floor)),
                "--sockets",
                str(args.sockets),
                "--progress",
                str(progress),
                "--result",
                str(result),
            ],
            cwd=REPO,
            env=env,
        )
        procs.append(clients)
        connecting = time.monotonic()
        deadline = connecting + 120
        while read_progress(progress).get("connected", 0) < args.sockets:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {read_progress(progress).get('connected')} sockets connected")
            time.sleep(0.2)
        # "connected" means the subscribe frames were sent; every subscribe was processed (its group
        # joined) once every socket has the seed event of every job.
        seeded = {str(job): 1 for job in real + floor}
        if not_subscribed := wait_consistent(progress, seeded, 120.0):
            raise RuntimeError(f"{not_subscribed} (socket, job) subscriptions not answered in 120 s")
        out["all_subscribed_s"] = round(time.monotonic() - connecting, 1)  # from the first connect

        def cpu_now() -> dict[str, float]:
            return {
                "server": sum(cpu_seconds(server.pid) for server in servers),
                "clients": cpu_seconds(clients.pid),
            }

        def cpu_percent(before: dict[str, float], wall: float) -> dict[str, float]:
            after = cpu_now()
            return {key: round(100 * (after[key] - before[key]) / wall, 1) for key in after}

        floor_seconds = args.floor_seconds or min(60.0, args.duration)
        # Warm-up (discarded): connections, caches and first-call costs. The floor runs first, on a
        # quiet server, so a steady phase that falls behind cannot leave a backlog in front of it.
        run_producers(floor, args.rate, 2.0, "floor", "warmup", 1, env)
        time.sleep(2)
        cpu0, t0 = cpu_now(), time.monotonic()
        out["floor_producers"] = run_producers(floor, args.rate, floor_seconds, "floor", "floor", 1, env)
        wall = time.monotonic() - t0
        out["cpu_floor_percent"] = cpu_percent(cpu0, wall)
        out["load_average_floor"] = list(os.getloadavg())
        time.sleep(2)
        run_producers(real, args.rate, 5.0, "store", "warmup", args.producers, env)
        time.sleep(1)
        cpu1, t1 = cpu_now(), time.monotonic()
        out["steady_producers"] = run_producers(
            real, args.rate, args.duration, "store", "steady", args.producers, env
        )
        wall = time.monotonic() - t1
        out["cpu_steady_percent"] = cpu_percent(cpu1, wall)
        out["load_average_steady"] = list(os.getloadavg())
        # Every socket must reach every job's stored head: a lost last frame is a gap too.
        steady_heads = {
            str(j): JobEvent.objects.filter(job_id=j).order_by("-seq").values_list("seq", flat=True).first()
            or 0
            for j in real
        }
        behind_at_end = wait_consistent(progress, steady_heads, 30.0)
        time.sleep(3)
        if args.burst:
            out["burst"] = run_burst(args, real, progress, env)
        clients.send_signal(signal.SIGTERM)
        clients.wait(120)
        data = json.loads(result.read_text())
        steady, floor_lat = data["latency"].get("steady", []), data["latency"].get("floor", [])
        out["steady"] = {
            **lat_summary(steady),
            "gaps": data["gaps"].get("steady", 0),
            "behind_at_end": behind_at_end,
            "goal_p50_ms": 50,
            "goal_p99_ms": 250,
        }
        out["floor"] = {**lat_summary(floor_lat), "gaps": data["gaps"].get("floor", 0)}
        # Server CPU per frame it delivered (every event goes to every socket).
        phases = (("floor", floor_seconds, floor_lat), ("steady", args.duration, steady))
        out["server_cpu_us_per_frame"] = {
            phase: round(out[f"cpu_{phase}_percent"]["server"] / 100 * seconds / max(len(lat), 1) * 1e6, 2)
            for phase, seconds, lat in phases
        }
        if args.burst:
            out["burst"].update(
                latency=lat_summary(data["latency"].get("burst", [])),
                gaps_healed_by_resync_or_fill=data["gaps"].get("burst", 0),
            )
        out["clients"] = {
            k: data[k]
            for k in (
                "dups",
                "resyncs",
                "rest_events",
                "frames",
                "coalesced_frames",
                "coalesced_events",
                "errors",
                "silent_sockets",
            )
        }
        out["steady_vs_floor"] = {
            "p50_ratio": round(out["steady"]["p50_ms"] / max(out["floor"]["p50_ms"], 0.01), 2),
            "p99_ratio": round(out["steady"]["p99_ms"] / max(out["floor"]["p99_ms"], 0.01), 2),
        }
        # Printed before the clean-up below: a database that is slow to drop must not lose the figures.
        emit(out)
    finally:
        stop_all()
        from django.db import connections

        connections.close_all()
        try:
            create_database(database_url)  # leave an empty database behind, not gigabytes of events
        except Exception as exc:
            print(f"could not reset {database_url}: {exc}", file=sys.stderr)


def wait_consistent(progress: Path, heads: dict[str, int], seconds: float) -> int:
    """Wait until every socket's last seq of each job reached ``heads``; the (socket, job) pairs
    still short of it after ``seconds`` (0 when all arrived)."""
    deadline = time.monotonic() + seconds
    while True:
        state = read_progress(progress)
        low, lasts = state.get("min_last", {}), state.get("lasts", {})
        if all(low.get(j, 0) >= head for j, head in heads.items()):
            return 0
        if time.monotonic() > deadline:
            return sum(1 for j, head in heads.items() for seq in lasts.get(j, []) if seq < head)
        time.sleep(0.05)


def run_burst(
    args: argparse.Namespace, real: list[int], progress: Path, env: dict[str, str]
) -> dict[str, Any]:
    """8,000 events in 5 s across the real jobs, every producer starting at the same moment."""
    from apps.events.models import JobEvent

    out: dict[str, Any] = {}
    before = JobEvent.objects.filter(job_id__in=real).count()
    burst_start_wall = time.time() + 6.0  # after the producers' interpreters and Django are up
    out["producers"] = run_producers(
        real,
        args.burst / args.burst_seconds,
        args.burst_seconds,
        "store",
        "burst",
        args.burst_producers,
        env,
        start_at=burst_start_wall,
    )
    # Monotonic times of the burst's start and of its last store, from the producers' wall clocks.
    burst_start = time.monotonic() - (time.time() - burst_start_wall)
    last_store = max(p["finished_at"] for p in out["producers"])
    stored_done = time.monotonic() - (time.time() - last_store)
    stored = JobEvent.objects.filter(job_id__in=real).count() - before
    heads = {
        str(j): JobEvent.objects.filter(job_id=j).order_by("-seq").values_list("seq", flat=True).first()
        for j in real
    }
    # The burst ends when its last event is stored (not before the 5 s it is meant to take).
    burst_end = max(burst_start + args.burst_seconds, stored_done)
    consistent_at = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        low = read_progress(progress).get("min_last", {})
        if all(low.get(j, 0) >= head for j, head in heads.items()):
            consistent_at = time.monotonic()
            break
        time.sleep(0.05)
    out.update(
        events=args.burst,
        stored=stored,
        all_stored=stored
        == int(args.burst / args.burst_seconds * args.burst_seconds // args.burst_producers)
        * args.burst_producers,
        store_seconds=round(stored_done - burst_start, 2),
        clients_consistent_after_burst_end_s=round(consistent_at - burst_end, 2) if consistent_at else None,
        goal_s=5.0,
    )
    return out


if __name__ == "__main__":
    main()
