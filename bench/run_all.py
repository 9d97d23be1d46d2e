"""Run every benchmark under bench/ and write a dated report (machine, versions, medians, p99s, ratios).

    .venv/bin/python bench/run_all.py [--quick] [--only render,push]

Each benchmark prints one JSON object as its last line; this script collects them, writes
``bench/reports/<date>.md`` (a table plus the raw JSON) and prints the table. Each result is also
kept in ``bench/reports/latest/<name>.json`` and the table covers all of them, so ``--only`` refreshes
one benchmark at a time. ``--quick`` runs
smaller sizes for a smoke check; the README's table comes from a full run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import REPO

BENCH = REPO / "bench"
PY = sys.executable

# name → (full arguments, quick arguments)
BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    "render": ([], ["--iterations", "300"]),
    "kubeapi": ([], ["--jobs", "100", "--pods", "4", "--writes", "1000"]),
    "push": ([], ["--saves", "100", "--rate", "5", "--jobs", "1000"]),
    "decisions": ([], ["--jobs", "20"]),
    "api": ([], ["--jobs", "1000", "--seconds", "3", "--servers", "uvicorn", "--rounds", "1"]),
    "events": ([], ["--duration", "60"]),
    "stream": ([], ["--frames", "5000", "--rounds", "3"]),
    "page": ([], []),
    "admission": ([], ["--seconds", "15"]),
    "advice": ([], ["--incidents", "200", "--jobs", "1000", "--iterations", "50"]),
    "fleet": (["--jobs", "100000", "--days", "90"], ["--jobs", "2000", "--days", "30", "--iterations", "50"]),
    "storm": ([], ["--jobs", "50", "--nodes", "250", "--minutes", "1", "--rate", "20"]),
    # As a real cluster: ClusterD writes no Events, so the baseline is its fault stream (bench_storm.py).
    "storm-strict": (
        ["--strict"],
        ["--strict", "--jobs", "50", "--nodes", "250", "--minutes", "1", "--rate", "20"],
    ),
}
# An entry that runs another entry's script with other arguments.
SCRIPTS: dict[str, str] = {"storm-strict": "storm"}


def run(
    name: str, quick: bool, timeout: float, bench_dir: Path = BENCH, log_dir: Path | None = None
) -> dict[str, Any]:
    """Run ``bench_<name>.py`` to the end or to ``timeout``, then make sure nothing it started lives on.

    Its output goes to files, never to pipes of ours: a grandchild that inherited a pipe would keep a
    ``communicate()`` waiting after the benchmark itself is gone (issue #27). It runs in a session of
    its own, so one ``killpg`` reaches it and whatever it did not move into a session of its own.
    """
    script = bench_dir / f"bench_{SCRIPTS.get(name, name)}.py"
    if not script.exists():
        return {"bench": name, "error": "not present"}
    full, small = BENCHMARKS.get(name, ([], []))
    log_dir = log_dir or bench_dir / "reports" / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    print(f"== {name}", flush=True)
    started = time.monotonic()
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            [PY, str(script), *(small if quick else full)],
            cwd=bench_dir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            close_fds=True,
        )
        try:
            status = f"exit {proc.wait(timeout)}"
        except subprocess.TimeoutExpired:
            status = f"timed out after {timeout:.0f} s"
        finally:
            leftovers = stop_tree(proc)
    seconds = round(time.monotonic() - started, 1)
    for line in reversed(stdout_path.read_text(errors="replace").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                result: dict[str, Any] = json.loads(line)
            except ValueError:
                break
            if leftovers:  # a benchmark that does not clean up after itself is a bug worth a line
                result["leftover_processes_killed"] = leftovers
            return result
    tail = stderr_path.read_text(errors="replace").strip()[-400:]
    failure: dict[str, Any] = {"bench": name, "error": f"{status} after {seconds} s: {tail}"}
    if leftovers:
        failure["leftover_processes_killed"] = leftovers
    return failure


# --- process cleanup --------------------------------------------------------------------------------
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def become_subreaper() -> None:
    """On Linux, orphans of our descendants are re-parented to us rather than to init, so a benchmark
    that died without stopping its children (SIGKILL, a crash) still leaves them where we can find them."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc; empty where there is none)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _reap() -> None:
    """Collect exited children, the benchmark's orphans included (we are their subreaper)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def stop_tree(proc: subprocess.Popen[bytes], grace: float = 20) -> int:
    """Stop the benchmark and everything below it; how many processes outlived the benchmark itself."""
    if proc.poll() is None:
        # SIGTERM first: the benchmark's handler stops its children's process groups (bench/_common.py).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # Whatever is left: in the benchmark's group, or re-parented to us from groups of its own.
    left = descendants(os.getpid())
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    _signal_all(left, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and descendants(os.getpid()):
        _reap()
        time.sleep(0.1)
    _signal_all(descendants(os.getpid()), signal.SIGKILL)
    _reap()
    return len(left)


def _fmt(value: Any, digits: int = 1) -> str:
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}"
    return "-" if value is None else str(value)


def rows(result: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(metric, median, p99, goal, ratio to baseline) for the report table."""
    name = result.get("bench", "?")
    if "error" in result:
        return [(f"{name}: {result['error']}", "", "", "", "")]
    g = result.get
    if name == "render":
        return [
            (
                "validate + render, 64 replicas (ms/call)",
                _fmt(g("median_ms"), 3),
                _fmt(g("p99_ms"), 3),
                "median ≤ 1 ms",
                f"{_fmt(g('ratio'), 2)}x yaml.safe_dump",
            )
        ]
    if name == "kubeapi":
        return [
            (
                "emulator writes/s (1,000 jobs x 16 pods, 10 watchers)",
                _fmt(g("writes_per_s"), 0),
                "",
                "≥ 500",
                f"{_fmt(g('throughput_ratio'), 2)}x bare aiohttp",
            ),
            (
                "emulator write latency (ms)",
                _fmt(g("p50_ms"), 2),
                _fmt(g("p99_ms"), 2),
                "p99 ≤ 20 ms",
                f"p99 {_fmt(g('p99_ratio'), 2)}x bare aiohttp",
            ),
            ("emulator RSS (MiB)", _fmt(g("server_rss_mib"), 0), "", "≤ 1,024", ""),
        ]
    if name == "push":
        save = g("save_to_patched_ms") or {}
        return [
            (
                f"policy save → patched ({g('saves')} saves at {g('rate_per_s')}/s, ms)",
                _fmt(save.get("median")),
                _fmt(save.get("p99")),
                "p50 ≤ 300, p99 ≤ 2,000",
                f"{_fmt(g('ratio_median'), 1)}x / {_fmt(g('ratio_p99'), 1)}x bare client patch",
            ),
            (
                f"drift sweep over {g('sweep_jobs')} jobs (s)",
                _fmt(g("sweep_s"), 1),
                "",
                "≤ 60",
                f"{_fmt(g('sweep_ratio'), 2)}x bare client reads",
            ),
        ]
    if name == "admission":
        return [
            (
                f"admission review at {_fmt(g('rate'), 0)} CREATEs/s for {_fmt(g('seconds'), 0)} s (ms)",
                _fmt(g("p50_ms")),
                _fmt(g("p99_ms")),
                "p99 ≤ 50 ms",
                f"p99 {_fmt((g('p99_ms') or 0) / (g('baseline_p99_ms') or 1), 1)}x bare DRF view "
                f"({_fmt(g('baseline_p99_ms'))} ms); record-after-answer p99 {_fmt(g('async_p99_ms'))}",
            )
        ]
    if name == "advice":
        return [
            (
                f"strategy advice, {g('incidents')} incidents, {g('candidates')} candidates (ms)",
                _fmt(g("advice_median_ms")),
                _fmt(g("advice_p99_ms")),
                f"p99 ≤ {_fmt(g('advice_goal_p99_ms'), 0)} ms",
                f"cold {_fmt(g('advice_cold_ms'))} ms; one what-if call "
                f"{_fmt(g('baseline_simulate_median_ms'), 3)} ms",
            ),
            (
                f"jobs list with could-save filter, {g('jobs')} jobs (ms)",
                _fmt(g("list_filtered_median_ms")),
                _fmt(g("list_filtered_p99_ms")),
                "median ≤ 1.2x plain list",
                f"{_fmt((g('list_filtered_median_ms') or 0) / (g('list_median_ms') or 1), 2)}x plain list",
            ),
        ]
    if name == "fleet":
        return [
            (
                f"fleet API over {g('days')} days, {g('jobs')} jobs, {g('incidents')} incidents (ms)",
                _fmt(g("window_p50_ms")),
                _fmt(g("window_p99_ms")),
                f"p99 ≤ {_fmt(g('goal_p99_ms'), 0)} ms",
                f"7 days {_fmt(g('week_p50_ms'))} ms; a viewer of 1/5 {_fmt(g('viewer_p50_ms'))} ms; "
                f"bare DRF view {_fmt(g('baseline_median_ms'), 2)} ms",
            )
        ]
    if name == "decisions":
        lat = g("confirm_to_strategy_ms") or {}
        return [
            (
                f"ProcessConfirmFault → ProcessRecoverStrategy, {g('jobs')} jobs at once (ms)",
                _fmt(lat.get("median")),
                _fmt(lat.get("p99")),
                "p99 ≤ 1,000",
                f"p99 {_fmt(g('ratio_p99_to_poll'), 2)}x ClusterD's 3 s poll",
            )
        ]
    if name == "api":
        servers = g("servers") or {}
        winner = g("winner")
        out = []
        for server, data in servers.items():
            for endpoint in ("detail", "policy", "list"):
                row = data.get(endpoint) or {}
                out.append(
                    (
                        f"API {endpoint} ({server}{'*' if server == winner else ''}): req/s, p99 @70 % (ms)",
                        _fmt(row.get("rps"), 0),
                        _fmt(row.get("open_p99_ms")),
                        "≥ 300 detail, ≥ 100 list",
                        f"{_fmt(row.get('ratio_to_bare'), 2)}x bare DRF view",
                    )
                )
        return out
    if name == "events":
        steady = g("steady") or {}
        floor = g("floor") or {}
        burst = g("burst") or {}
        return [
            (
                f"event → client latency, {g('rate')}/s to {g('sockets')} sockets, {g('duration_s')} s (ms)",
                _fmt(steady.get("p50_ms")),
                _fmt(steady.get("p99_ms")),
                "p50 ≤ 50, p99 ≤ 250; 0 gaps",
                f"{_fmt((g('steady_vs_floor') or {}).get('p50_ratio'), 2)}x / "
                f"{_fmt((g('steady_vs_floor') or {}).get('p99_ratio'), 2)}x floor (raw group_send "
                f"{_fmt(floor.get('p50_ms'))} / {_fmt(floor.get('p99_ms'))}); "
                f"gaps {steady.get('gaps')}, dups {(g('clients') or {}).get('dups')}; "
                f"{g('server_workers')} server process(es), "
                f"{_fmt((g('server_cpu_us_per_frame') or {}).get('steady'), 1)} µs server CPU per frame",
            ),
            (
                f"burst of {burst.get('events')} events in 5 s: seconds to store all",
                _fmt(burst.get("store_seconds")),
                "",
                "all stored; consistent ≤ 5 s after the burst",
                f"every client consistent {_fmt(burst.get('clients_consistent_after_burst_end_s'))} s "
                f"after; {(g('clients') or {}).get('coalesced_frames')} coalesced frames",
            ),
        ]
    if name == "stream":
        return [
            (
                f"websocket stream, in-order frames in batches of {g('batch')} (µs/frame)",
                _fmt(g("live_us_per_frame"), 2),
                "",
                "",
                f"of which JobStreams alone {_fmt(g('stream_alone_live_us_per_frame'), 2)}",
            ),
            (
                f"websocket stream, a backlog of {g('backlog')} coalesced (µs/frame)",
                _fmt(g("backlog_us_per_frame"), 2),
                "",
                "",
                "",
            ),
            *(
                (
                    f"websocket server path, hub → {g('full_sockets')} sockets → uvicorn --ws {ws} "
                    "(µs per frame per socket)",
                    _fmt(us, 2),
                    "",
                    "",
                    "msgpack, fan-out, middleware, frame building; not the kernel's write",
                )
                for ws, us in (g("full_us_per_socket_frame") or {}).items()
            ),
        ]
    if name == "page":
        fcp = g("fcp_ms") or {}
        ready = g("ready_ms") or {}
        weight = (g("bytes") or {}).get("median")
        return [
            (
                f"job page first contentful paint, {g('events')} events (ms)",
                _fmt(fcp.get("median"), 0),
                _fmt(fcp.get("p99"), 0),
                "≤ 500 ms",
                "",
            ),
            (
                "job page fully usable (data-ready, ms)",
                _fmt(ready.get("median"), 0),
                _fmt(ready.get("p99"), 0),
                "",
                "",
            ),
            (
                "job page initial weight (KB)",
                _fmt(weight / 1024 if weight else None, 0),
                "",
                "≤ 300 KB",
                f"{g('requests')} requests",
            ),
        ]
    if name == "storm":
        return _storm_rows(result)
    return [(name, "", "", "", json.dumps(result)[:80])]


def _storm_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    out = []
    # Strict: timed against ClusterD's fault stream (no ClusterD Events, as on a real cluster).
    after = "ClusterD's fault signal" if result.get("strict") else "the cluster's Event"
    storm = result.get("storm")
    if storm:
        added = storm.get("added_s") or {}
        bare = storm.get("bare_watch_after_injection_s") or {}
        seen = (
            f"{storm.get('faults_signalled_by_clusterd')} signalled by ClusterD"
            if result.get("strict")
            else f"bare watch {_fmt(bare.get('median'), 2)} / {_fmt(bare.get('p99'), 2)} s after injection"
        )
        out.append(
            (
                f"storm: {storm.get('faults')} jobs fault at once, added after {after} (s)",
                _fmt(added.get("median"), 2),
                _fmt(added.get("p99"), 2),
                "p99 ≤ 1 s; each fault in one incident",
                f"{seen}; {storm.get('in_exactly_one_incident')} of {storm.get('faults')} in one incident",
            )
        )
    sustained = result.get("sustained")
    if sustained:
        lag = sustained.get("added_s") or {}
        out.append(
            (
                f"sustained {sustained.get('rate_injected')} faults/s, 2 clusters, 2 ingesters, "
                f"{sustained.get('seconds')} s: lag after {after} (s)",
                _fmt(lag.get("median"), 2),
                _fmt(lag.get("p99"), 2),
                "p99 ≤ 2 s, 0 lost, 0 duplicated",
                f"lost {sustained.get('lost')}, duplicated {sustained.get('duplicated')}; "
                f"simulator {sustained.get('sim_cpu_ms_per_fault')} ms CPU a fault",
            )
        )
    return out or [("storm", "", "", "", json.dumps(result)[:80])]


def machine() -> str:
    cpus = os.cpu_count()
    mem = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kb = int(meminfo.read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    return f"{platform.machine()}, {cpus} CPUs{mem}, {platform.system()} {platform.release()}"


def versions() -> str:
    import importlib.metadata as md

    names = ("Django", "djangorestframework", "channels", "channels-redis", "celery", "kubernetes", "uvicorn")
    return ", ".join(f"{n} {md.version(n)}" for n in names) + f", Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated names (bench_<name>.py)")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds per benchmark (default 900 quick, 3600 full)"
    )
    parser.add_argument("--bench-dir", type=Path, default=BENCH, help="where the bench_<name>.py scripts are")
    parser.add_argument("--reports", type=Path, default=None, help="default <bench-dir>/reports")
    args = parser.parse_args(argv)
    timeout = args.timeout or (900.0 if args.quick else 3600.0)
    reports = args.reports or args.bench_dir / "reports"
    wanted = [n for n in args.only.split(",") if n]
    selected = [n for n in BENCHMARKS if not wanted or n in wanted]
    selected += [n for n in wanted if n not in BENCHMARKS]  # a script of the same form, run without arguments
    become_subreaper()
    latest = reports / "latest"
    latest.mkdir(parents=True, exist_ok=True)
    for name in selected:
        result = run(name, args.quick, timeout, args.bench_dir, reports / "logs")
        (latest / f"{name}.json").write_text(json.dumps(result, sort_keys=True))
    # The table covers every benchmark's latest result, so --only can refresh one at a time.
    names = [*BENCHMARKS, *(n for n in selected if n not in BENCHMARKS)]
    results = [
        json.loads((latest / f"{n}.json").read_text()) for n in names if (latest / f"{n}.json").exists()
    ]
    table = ["| benchmark | median | p99 | goal | vs baseline |", "|---|---|---|---|---|"]
    for result in results:
        table.extend("| " + " | ".join(row) + " |" for row in rows(result))
    today = dt.date.today().isoformat()
    report = [
        f"# Benchmark report {today}{' (quick)' if args.quick else ''}",
        "",
        f"Machine: {machine()}. Versions: {versions()}.",
        "",
        *table,
        "",
        "## Raw results",
        "",
        "```json",
        *(json.dumps(r, sort_keys=True) for r in results),
        "```",
        "",
    ]
    out = reports / f"{today}{'-quick' if args.quick else ''}.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(report))
    print("\n".join(table))
    print(f"report: {out}")


if __name__ == "__main__":
    main()
