"""A tiny HTTP control endpoint so other processes can inject faults and scenarios.

Runs on its own port (by default the API port + 1) because the Kubernetes API emulator is not ours
to extend. ``POST /faults`` takes ``{"namespace", "job", "rank", "type", "code", "level", "recovers"}``;
``POST /scenarios`` takes a scenario YAML body; ``GET /healthz`` answers ``ok``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any, Protocol

from aiohttp import web

from simcluster.injector import FaultSpecError, UnknownJobError
from simcluster.scenarios import Scenario, ScenarioError, parse_scenario

log = logging.getLogger(__name__)


class FaultTarget(Protocol):
    """What the endpoint drives: ``runtime.SimCluster``, which starts this server (so it is named
    here by shape, not imported: the runtime imports this module)."""

    def inject_spec(self, data: Any) -> str: ...

    def check_scenario_jobs(self, scenario: Scenario) -> None: ...

    def run_scenario(self, scenario: Scenario) -> str: ...


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def build_app(sim: FaultTarget) -> web.Application:
    """The aiohttp application; handlers call into ``sim`` from a worker thread."""

    async def faults(request: web.Request) -> web.Response:
        try:
            body: Any = json.loads(await request.text() or "null")
        except ValueError as exc:
            return _error(400, f"body is not JSON: {exc}")
        try:
            fault_id = await asyncio.to_thread(sim.inject_spec, body)
        except FaultSpecError as exc:
            return _error(400, str(exc))
        except UnknownJobError as exc:
            return _error(404, str(exc))
        return web.json_response({"id": fault_id}, status=201)

    async def scenarios(request: web.Request) -> web.Response:
        try:
            scenario = parse_scenario(await request.text())
        except ScenarioError as exc:
            return _error(400, str(exc))
        try:
            await asyncio.to_thread(sim.check_scenario_jobs, scenario)
        except UnknownJobError as exc:
            return _error(404, str(exc))
        run_id = sim.run_scenario(scenario)
        return web.json_response({"id": run_id, "faults": len(scenario.faults)}, status=202)

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/faults", faults)
    app.router.add_post("/scenarios", scenarios)
    app.router.add_get("/healthz", healthz)
    return app


class ControlServer:
    """Runs ``build_app`` on its own event loop in a daemon thread."""

    def __init__(self, sim: FaultTarget, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sim = sim
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="simcluster-control", daemon=True)
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)
        if self._error:
            raise RuntimeError(f"control endpoint failed to start on {self.host}:{self.port}: {self._error}")

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._runner = web.AppRunner(build_app(self.sim))
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, self.host, self.port)
            loop.run_until_complete(site.start())
            server = getattr(site, "_server", None)
            if server is not None and server.sockets:
                self.port = server.sockets[0].getsockname()[1]
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._runner.cleanup())
        loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
