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

    @classmethod
    def system(cls, component: str) -> Actor:
        """A component of the platform acting on its own (no user): recorded as ``system:<component>``."""
        return cls(name=f"system:{component}")

    @property
    def account(self) -> User | None:
        """The signed-in user to link the record to; ``None`` for a system component or anonymous."""
        user = self.user
        return user if isinstance(user, User) and user.is_authenticated else None

    @property
    def display_name(self) -> str:
        """The name the record shows: the given name, else the username, else ``system``."""
        account = self.account
        return self.name or (account.get_username() if account is not None else "system")
