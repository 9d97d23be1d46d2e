"""WSGI entry point (HTTP only; the ASGI app in asgi.py also serves websockets)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")
application = get_wsgi_application()
