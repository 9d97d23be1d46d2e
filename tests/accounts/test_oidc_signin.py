"""Issue #24 item 8: sign-in with the company's identity provider, end to end.

The provider is real: ``django-oauth-toolkit`` in OIDC mode, its own Django project and process
(``tests/support/oidc_provider/``), an RSA key made at its start, RS256 ID tokens checked against its
JWKS, endpoints found through its discovery document. The browser is a ``requests`` session that
follows the authorization-code flow (with PKCE and a nonce) across the live product server and the
provider, signing in with the provider's login form.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from django.contrib.auth.models import User

from apps.accounts.models import NamespaceGrant, OidcIdentity, Role
from apps.accounts.oidc.provider import forget_discovery
from apps.accounts.selectors import role_for
from apps.audit.models import AuditEntry
from apps.jobs.models import Cluster, TrainingJob
from tests.support.html_forms import first_form
from tests.support.world import training_job

REPO = Path(__file__).resolve().parents[2]
CLIENT_ID = "control-plane"
CLIENT_SECRET = "provider-test-secret-0123456789"
ALICE = {
    "username": "alice",
    "password": "alice-at-the-provider-1",
    "email": "alice@corp.example",
    "groups": ["ml-team-a", "readers", "not-mapped"],
}
GROUP_ROLES = {"ml-team-a": {"team-a": "editor"}, "readers": {"team-b": "viewer"}, "sre": {"*": "admin"}}

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow(seconds=20)]


@pytest.fixture
def provider(live_server: Any, tmp_path: Path) -> Iterator[str]:
    """The provider process, its client registered with the live server's callback; its base URL."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")
    }
    env.update(
        OIDC_PROVIDER_DB=str(tmp_path / "provider.sqlite3"),
        OIDC_CLIENT_ID=CLIENT_ID,
        OIDC_CLIENT_SECRET=CLIENT_SECRET,
        PYTHONPATH=str(REPO),
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.oidc_provider.serve",
            json.dumps([ALICE]),
            f"{live_server.url}/oidc/callback/",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once it listens; empty if it died first
        assert line.startswith("PORT "), f"the provider did not start: {line!r} (exit {proc.poll()})"
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def oidc_on(provider: str, settings: Any) -> Iterator[None]:
    settings.OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Corp SSO"
    settings.OIDC_OP_DISCOVERY_URL = f"{provider}/o/.well-known/openid-configuration"
    settings.OIDC_RP_SCOPES = "openid email profile groups"
    settings.OIDC_GROUP_ROLES = json.dumps(GROUP_ROLES)
    forget_discovery()
    yield
    forget_discovery()


@pytest.fixture
def jobs() -> dict[str, TrainingJob]:
    cluster = Cluster.objects.create(name="sim", kubeconfig_path="/nonexistent")
    return {ns: training_job(cluster, f"train-{ns}", namespace=ns) for ns in ("team-a", "team-b", "team-c")}


def sign_in_through_the_provider(product: str, browser: requests.Session) -> requests.Response:
    """Start at the product's login page, take "Sign in with Corp SSO", log in at the provider, come back."""
    login_page = browser.get(f"{product}/login/", timeout=10)
    assert "Sign in with Corp SSO" in login_page.text
    at_provider = browser.get(f"{product}/oidc/authenticate/", timeout=10)  # redirects to the provider
    assert "/accounts/login/" in at_provider.url, at_provider.url
    action, fields = first_form(at_provider.text, at_provider.url)
    fields.update(username=ALICE["username"], password=ALICE["password"])
    # The provider authorizes (no consent screen for the company's own client) and sends the browser
    # to the product's callback, which exchanges the code and lands on the jobs page.
    return browser.post(action, data=fields, headers={"Referer": at_provider.url}, timeout=20)


def test_sign_in_maps_groups_to_namespace_roles_and_refuses_the_rest(
    live_server: Any, oidc_on: None, jobs: dict[str, TrainingJob]
) -> None:
    product = live_server.url
    browser = requests.Session()
    landed = sign_in_through_the_provider(product, browser)
    assert landed.status_code == 200 and landed.url == f"{product}/", (landed.url, landed.text[:500])
    # The jobs page, signed in as the provider's alice, shows her namespaces' jobs and nothing else.
    assert "train-team-a" in landed.text and "train-team-b" in landed.text
    assert "train-team-c" not in landed.text
    user = User.objects.get(oidc_identity__subject__isnull=False)
    assert user.username == "alice" and user.email == ALICE["email"] and not user.has_usable_password()
    assert not user.is_staff and not user.is_superuser
    assert role_for(user, jobs["team-a"]) == Role.EDITOR
    assert role_for(user, jobs["team-b"]) == Role.VIEWER
    assert role_for(user, jobs["team-c"]) is None
    # Refused: a change on a namespace her groups give only viewer on (403), and one they do not
    # grant at all is invisible (404, the API's "not yours").
    csrf = {"X-CSRFToken": browser.cookies["csrftoken"], "Referer": f"{product}/"}
    body = {"spec": {"strategies": ["recover"]}, "revision": 0}
    refused = browser.put(
        f"{product}/api/v1/jobs/{jobs['team-b'].pk}/policy/", json=body, headers=csrf, timeout=10
    )
    assert refused.status_code == 403, refused.text
    assert "viewer" in refused.json()["errors"][0]["message"]
    assert browser.get(f"{product}/api/v1/jobs/{jobs['team-c'].pk}/", timeout=10).status_code == 404
    assert browser.get(f"{product}/api/v1/jobs/{jobs['team-a'].pk}/", timeout=10).status_code == 200
    # One audit entry for the sign-in, with what it granted.
    entry = AuditEntry.objects.get(action="user.oidc_login")
    assert entry.actor_name == "alice" and entry.after["groups"] == sorted(ALICE["groups"])
    assert {(g["namespace"], g["role"]) for g in entry.after["granted"]} == {
        ("team-a", "editor"),
        ("team-b", "viewer"),
    }
    identity = OidcIdentity.objects.get(user=user)
    assert identity.issuer.startswith("http://127.0.0.1:") and identity.groups == sorted(ALICE["groups"])


def test_a_second_sign_in_revokes_roles_the_groups_no_longer_give(
    live_server: Any, oidc_on: None, jobs: dict[str, TrainingJob], settings: Any
) -> None:
    sign_in_through_the_provider(live_server.url, requests.Session())
    user = User.objects.get(username="alice")
    hand_made = NamespaceGrant.objects.create(user=user, namespace="team-c", role=Role.VIEWER)
    settings.OIDC_GROUP_ROLES = json.dumps({"ml-team-a": {"team-a": "viewer"}})  # the mapping changed
    again = sign_in_through_the_provider(live_server.url, requests.Session())
    assert again.status_code == 200 and again.url == f"{live_server.url}/"
    assert role_for(user, jobs["team-a"]) == Role.VIEWER
    assert role_for(user, jobs["team-b"]) is None
    assert NamespaceGrant.objects.filter(pk=hand_made.pk).exists()  # an administrator's grant stays
    last = AuditEntry.objects.filter(action="user.oidc_login").order_by("-id").first()
    assert last is not None and not last.after["user_created"]
    assert {(g["namespace"], g["role"]) for g in last.after["revoked"]} == {
        ("team-a", "editor"),
        ("team-b", "viewer"),
    }


def test_local_accounts_still_sign_in_next_to_oidc(live_server: Any, oidc_on: None) -> None:
    """Break-glass: the username and password form works with OIDC on."""
    User.objects.create_superuser("root", password="break-glass-pw-1")
    browser = requests.Session()
    page = browser.get(f"{live_server.url}/login/", timeout=10)
    action, fields = first_form(page.text.split('id="oidc-login"', 1)[-1], page.url)
    fields.update(username="root", password="break-glass-pw-1")
    landed = browser.post(action, data=fields, headers={"Referer": page.url}, timeout=10)
    assert landed.status_code == 200 and landed.url == f"{live_server.url}/"
