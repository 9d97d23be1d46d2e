"""User flows against a rehearsed install: HTTP to its web process, as a user with an API token would,
or as an administrator in the admin site (where outbound webhooks are set).

The token is made the way an operator would make the first one: ``manage.py createsuperuser`` and
``manage.py issue_token`` in the web pod's environment (``kubectl exec`` in a real cluster).
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

from tests.support.deploy import REPO
from tests.support.rehearsal import Pod

# A name in the overlay's ALLOWED_HOSTS: the Service's, as a client inside the cluster calls it.
WEB_HOST = "recovery-control-plane"


def issue_admin_token(web: Pod, password: str, username: str = "platform-admin") -> str:
    """A superuser (``password``) and an API token for it, made in the web pod's environment."""
    env = {**web.env, "DJANGO_SUPERUSER_PASSWORD": password}

    def manage(*args: str) -> str:
        done = subprocess.run(
            ["python", "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    manage("createsuperuser", "--noinput", "--username", username, "--email", f"{username}@example.com")
    return manage("issue_token", username, "--name", "rehearsal").splitlines()[-1]


@dataclass
class Api:
    """The rehearsed web process's API (``/api/v1/``) as the token's user."""

    port: int
    key: str

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, dict[str, str]]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/v1/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={
                "Host": WEB_HOST,
                "Authorization": f"Token {self.key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                **(headers or {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw, status, got = response.read(), response.status, _lower(response.headers.items())
        except urllib.error.HTTPError as exc:
            raw, status, got = exc.read(), exc.code, _lower(exc.headers.items())
        text = raw.decode(errors="replace")
        try:
            return status, json.loads(text) if text else None, got
        except json.JSONDecodeError:
            return status, text, got

    def job_named(self, namespace: str, name: str) -> dict[str, Any] | None:
        status, body, _ = self.call("GET", f"jobs/?namespace={namespace}")
        assert status == 200, body
        items = body["results"] if isinstance(body, dict) else body
        return next((j for j in items if j["name"] == name and j.get("namespace") == namespace), None)


def _lower(items: Any) -> dict[str, str]:
    """Header names lower-cased (HTTP names are case-insensitive; servers differ in how they send them)."""
    return {name.lower(): value for name, value in items}


def forbidden_lines(log: str) -> list[str]:
    """Lines of a process log that show the cluster refusing it (a 403 from the API server)."""
    return [line for line in log.splitlines() if "403" in line and "orbidden" in line]


@dataclass
class AdminSite:
    """The web process's Django admin, signed in, as through the Ingress: TLS ends there, so requests
    carry ``X-Forwarded-Proto: https`` (trusted: ``SECURE_PROXY_SSL_HEADER``) and the browser's
    ``Origin`` (Django's CSRF check)."""

    port: int
    cookies: dict[str, str] = field(default_factory=dict)

    def request(self, method: str, path: str, form: dict[str, str] | None = None) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {
            "Host": WEB_HOST,
            "X-Forwarded-Proto": "https",
            "Origin": f"https://{WEB_HOST}",
            "Cookie": "; ".join(f"{name}={value}" for name, value in self.cookies.items()),
        }
        body = None
        if form is not None:
            form = {**form, "csrfmiddlewaretoken": self.cookies.get("csrftoken", "")}
            body, headers["Content-Type"] = urlencode(form), "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body, headers)
            response = conn.getresponse()
            for cookie in response.headers.get_all("Set-Cookie") or []:
                name, _, rest = cookie.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0]
            return response.status, response.read().decode(errors="replace")
        finally:
            conn.close()

    def sign_in(self, username: str, password: str) -> None:
        self.request("GET", "/admin/login/")  # the CSRF cookie
        status, page = self.request(
            "POST",
            "/admin/login/?next=/admin/",
            {"username": username, "password": password, "next": "/admin/"},
        )
        assert status == 302 and "sessionid" in self.cookies, (status, errors_in(page))

    def add(self, model: str, form: dict[str, str]) -> None:
        """The model's add form (``app/model``), saved; a form error fails with the admin's message."""
        self.request("GET", f"/admin/{model}/add/")
        status, page = self.request("POST", f"/admin/{model}/add/", {**form, "_save": "Save"})
        assert status == 302, (status, errors_in(page))


def errors_in(page: str) -> list[str]:
    return re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', page, re.S) or [page[-1500:]]


class Receiver:
    """An outbound webhook's receiver: an HTTP server on loopback that keeps every POST it gets."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                received.append(
                    (dict(self.headers.items()), self.rfile.read(int(self.headers["Content-Length"])))
                )
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/recovery"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
