"""``manage.py issue_token USERNAME [--name NAME] [--expires-days N]``: print a new API key once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from apps.accounts.services import TooManyTokens, token_issue

MAX_EXPIRY_DAYS = 3650


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print its key (shown only this once; store it safely)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", metavar="USERNAME")
        parser.add_argument("--name", default="cli", help='a label to recognise the token by (default "cli")')
        parser.add_argument(
            "--expires-days", type=int, default=None, metavar="N", help="expire after N days (default: never)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username: str = options["username"]
        name: str = options["name"].strip()
        days: int | None = options["expires_days"]
        if not name or len(name) > 100:
            raise CommandError("--name must be 1 to 100 characters")
        if days is not None and not 1 <= days <= MAX_EXPIRY_DAYS:
            raise CommandError(f"--expires-days must be between 1 and {MAX_EXPIRY_DAYS}")
        user_model = get_user_model()
        try:
            user = user_model.objects.get(**{user_model.USERNAME_FIELD: username})
        except user_model.DoesNotExist:
            raise CommandError(
                f"no user named {username!r}; create it first (manage.py createsuperuser)"
            ) from None
        if not user.is_active:
            raise CommandError(f"user {username!r} is disabled; a token for it would not authenticate")
        expires_at = timezone.now() + timedelta(days=days) if days else None
        try:
            token, key = token_issue(user, name, expires_at)
        except TooManyTokens as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(
            f"Token {token.name!r} for {username} created"
            + (f", expires {expires_at:%Y-%m-%d %H:%M} UTC" if expires_at else "")
            + ". Use it as: Authorization: Token <key>"
        )
        self.stdout.write(key)
