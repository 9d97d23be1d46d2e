#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def _settings_from_argv(argv: list[str]) -> str | None:
    """``--settings X`` / ``--settings=X``, which Django would only read after loading the default."""
    for index, arg in enumerate(argv):
        if arg.startswith("--settings="):
            return arg.split("=", 1)[1]
        if arg == "--settings" and index + 1 < len(argv):
            return argv[index + 1]
    return None


def main() -> None:
    chosen = _settings_from_argv(sys.argv[1:])
    if chosen:
        os.environ["DJANGO_SETTINGS_MODULE"] = chosen
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    # Load the settings here: Django's command runner swallows a settings error (a missing
    # SECRET_KEY, a malformed variable) and fails later with an unrelated "Models aren't loaded".
    try:
        settings.INSTALLED_APPS  # noqa: B018
    except ImproperlyConfigured as exc:
        sys.exit(f"configuration error: {exc}")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
