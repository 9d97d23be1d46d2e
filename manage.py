#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")
    from django.conf import settings
    from django.core.management import execute_from_command_line

    # Load the settings here: Django's command runner swallows a settings error (a missing
    # SECRET_KEY, a malformed variable) and fails later with an unrelated "Models aren't loaded".
    settings.INSTALLED_APPS  # noqa: B018
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
