"""The admission webhook's HTTPS server: uvicorn with a client-verifying, self-reloading TLS context.

``manage.py serve_admission`` runs it in the admission Deployment and in ``bootstrap.py run``; the
tests run the same server in a thread (:class:`AdmissionServer`), so the API server's path (TLS,
client certificate, this process's URLconf) is the one under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

import uvicorn

from apps.admission.tls import ReloadingServerContext

ASGIApp = Callable[..., Any]


def _config(app: ASGIApp, tls: ReloadingServerContext, **options: Any) -> uvicorn.Config:
    def factory(_config: uvicorn.Config, _default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        return tls.context

    return uvicorn.Config(app, ssl_context_factory=factory, lifespan="off", **options)


async def _watch_certificate(tls: ReloadingServerContext, every_seconds: float) -> None:
    while True:
        await asyncio.sleep(every_seconds)
        tls.reload_if_changed()


PROBE_PATHS = frozenset({"/livez", "/readyz"})


def probes_only(app: ASGIApp) -> ASGIApp:
    """``app`` answering only the kubelet's probe paths: the plain-HTTP probe port must never reach
    the webhook (the kubelet has no client certificate, so it cannot probe the TLS port itself)."""

    async def probe_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") in PROBE_PATHS:
            await app(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        await send(
            {"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]}
        )
        await send({"type": "http.response.body", "body": b"only /livez and /readyz here\n"})

    return probe_app


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket whose accepted connections send at once (TCP_NODELAY; Linux copies it
    from the listener to what it accepts). Without it, under uvloop a response written as more than
    one TLS record waited for the client's delayed ACK, about 40 ms, once requests came close
    together: bench_admission measured p50 4 ms at 10 requests/s and 45 ms from 30/s on, the bare
    view as much as the webhook; with it, 4 ms at 50/s."""
    sock = socket.create_server((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


async def _serve_probes(app: ASGIApp, sock: socket.socket) -> None:
    config = uvicorn.Config(probes_only(app), lifespan="off", log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


async def serve(
    app: ASGIApp,
    tls: ReloadingServerContext,
    sock: socket.socket,
    *,
    reload_seconds: float,
    started: Callable[[uvicorn.Server], None] | None = None,
    probe_sock: socket.socket | None = None,
    **options: Any,
) -> None:
    """Serve ``app`` on ``sock`` until the server is told to exit (SIGTERM, or ``should_exit``);
    with ``probe_sock``, also ``/livez`` and ``/readyz`` (only those) over plain HTTP there."""
    server = uvicorn.Server(_config(app, tls, **options))
    loop = asyncio.get_running_loop()
    if threading.current_thread() is threading.main_thread():
        # SIGHUP: re-read the pair now (an operator who rotated it by hand need not wait).
        loop.add_signal_handler(signal.SIGHUP, lambda: tls.reload_if_changed(force=True))
    watcher = asyncio.create_task(_watch_certificate(tls, reload_seconds))
    probes = asyncio.create_task(_serve_probes(app, probe_sock)) if probe_sock is not None else None
    if started is not None:
        started(server)
    try:
        await server.serve(sockets=[sock])
    finally:
        for task in (watcher, probes):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


class AdmissionServer:
    """:func:`serve` on its own thread and loop, on a loopback port of its own (tests, benchmarks)."""

    def __init__(self, app: ASGIApp, tls: ReloadingServerContext, *, reload_seconds: float = 0.2) -> None:
        self.tls = tls
        self._sock = listening_socket("127.0.0.1", 0)
        self.port = int(self._sock.getsockname()[1])
        self.url = f"https://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        ready = threading.Event()

        def started(server: uvicorn.Server) -> None:
            self._server, self._loop = server, asyncio.get_running_loop()
            ready.set()

        def run() -> None:
            asyncio.run(
                serve(
                    app, tls, self._sock, reload_seconds=reload_seconds, started=started, log_level="warning"
                )
            )

        self._thread = threading.Thread(target=run, name="admission-server", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the admission server did not start")

    def reload_now(self) -> None:
        """Ask the server's loop to re-read the certificate (what SIGHUP does), and wait for it."""
        assert self._loop is not None
        done = threading.Event()

        def reload() -> None:
            self.tls.reload_if_changed(force=True)
            done.set()

        self._loop.call_soon_threadsafe(reload)
        done.wait(10)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        self._thread.join(30)
        self._sock.close()
