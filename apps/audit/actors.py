"""Who is acting: the one value every service that changes something hands to the audit trail."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User


@dataclass(frozen=True)
class Actor:
    """Who is making a change, as the audit trail records it."""

    user: User | AnonymousUser | None = None
    name: str = ""  # e.g. "system:adoption" when there is no user
    token_name: str = ""
    request_id: str = ""
