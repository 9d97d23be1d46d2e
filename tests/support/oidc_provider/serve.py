"""Run the test OIDC provider: ``python -m tests.support.oidc_provider.serve USERS_JSON REDIRECT_URI``.

Makes an RSA key, migrates its own SQLite file (``OIDC_PROVIDER_DB``), creates the users (JSON:
``[{"username", "password", "email", "groups"}]``) and one confidential client whose id and secret
are ``OIDC_CLIENT_ID``/``OIDC_CLIENT_SECRET``, then serves on 127.0.0.1 on a free port and prints
``PORT <n>`` once it listens (the test waits for that line, not for a time).
"""

from __future__ import annotations

import json
import os
import sys
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _rsa_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def main() -> None:
    users, redirect_uri = json.loads(sys.argv[1]), sys.argv[2]
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.support.oidc_provider.settings"
    os.environ["OIDC_PROVIDER_RSA_KEY"] = _rsa_pem()
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0)
    for spec in users:
        user = User.objects.create_user(spec["username"], email=spec["email"], password=spec["password"])
        for name in spec["groups"]:
            user.groups.add(Group.objects.get_or_create(name=name)[0])
    Application.objects.create(
        name="control plane",
        client_id=os.environ["OIDC_CLIENT_ID"],
        client_secret=os.environ["OIDC_CLIENT_SECRET"],
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=redirect_uri,
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,  # a company's own app: no consent screen
    )
    server = make_server(
        "127.0.0.1", 0, get_wsgi_application(), server_class=_ThreadingServer, handler_class=_QuietHandler
    )
    print(f"PORT {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
