"""User flows against a rehearsed install: HTTP to its web process, as a user with an API token would.

The token is made the way an operator would make the first one: ``manage.py createsuperuser`` and
``manage.py issue_token`` in the web pod's environment (``kubectl exec`` in a real cluster).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from tests.support.deploy import REPO
from tests.support.rehearsal import Pod

# A name in the overlay's ALLOWED_HOSTS: the Service's, as a client inside the cluster calls it.
WEB_HOST = "recovery-control-plane"


def issue_admin_token(web: Pod, username: str = "platform-admin") -> str:
    """A superuser and an API token for it, made in the web pod's environment."""
    env = {**web.env, "DJANGO_SUPERUSER_PASSWORD": secrets.token_urlsafe(16)}

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
