"""What a ``/ws/events/`` client may send (design.md §4.3), read into typed requests, and how often.

``{"subscribe": {"job": id, "after_seq": n}}``, ``{"subscribe": {"jobs": "all"}}``,
``{"unsubscribe": {"job": id}}`` / ``{"unsubscribe": {"jobs": "all"}}``. Anything else is an
``Invalid`` whose ``error`` and ``details`` become the ``error`` frame the client gets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

VERBS = ("subscribe", "unsubscribe")


@dataclass(frozen=True)
class FollowJob:
    job_id: int
    after_seq: int


@dataclass(frozen=True)
class UnfollowJob:
    job_id: int


@dataclass(frozen=True)
class FollowAllJobs:
    """The summary stream of every job the user may see."""


@dataclass(frozen=True)
class UnfollowAllJobs:
    pass


@dataclass(frozen=True)
class Invalid:
    error: str
    details: dict[str, Any] = field(default_factory=dict)  # ``field``, ``job``: extra keys of the frame


Request = FollowJob | UnfollowJob | FollowAllJobs | UnfollowAllJobs


@dataclass(frozen=True)
class ClientMessage:
    """One frame from the client: ``subscribes`` says whether it spends a subscribe token (a
    malformed subscribe does too, so retrying a bad one in a loop is limited like a good one)."""

    subscribes: bool
    request: Request | Invalid


def _positive_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def read_message(content: Any) -> ClientMessage:
    """The client's JSON frame (already decoded) as a request, or why it is not one."""
    if not isinstance(content, dict) or len(content) != 1:
        return ClientMessage(False, Invalid("expected one of {'subscribe': ...} or {'unsubscribe': ...}"))
    verb, body = next(iter(content.items()))
    if verb not in VERBS or not isinstance(body, dict):
        return ClientMessage(
            False, Invalid(f"unknown message {verb!r}; expected 'subscribe' or 'unsubscribe' with an object")
        )
    subscribes = verb == "subscribe"
    return ClientMessage(subscribes, _read_body(subscribes, body))


def _read_body(subscribes: bool, body: dict[str, Any]) -> Request | Invalid:
    if body.get("jobs") == "all":
        return FollowAllJobs() if subscribes else UnfollowAllJobs()
    job_id = body.get("job")
    if not _positive_int(job_id):
        return Invalid("'job' must be a positive integer job id", {"field": "job"})
    if not subscribes:
        return UnfollowJob(job_id)
    after_seq = body.get("after_seq", 0)
    if not isinstance(after_seq, int) or isinstance(after_seq, bool) or after_seq < 0:
        return Invalid("'after_seq' must be an integer ≥ 0", {"field": "after_seq", "job": job_id})
    return FollowJob(job_id, after_seq)


class SubscribeBucket:
    """A token bucket per socket (``EVENTS_WS_SUBSCRIBE_BURST`` tokens, refilled at
    ``EVENTS_WS_SUBSCRIBE_RATE`` per second): each subscribe may replay up to
    ``EVENTS_WS_MAX_REPLAY`` events, so a socket may not send them without bound."""

    def __init__(self, burst: float, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.rate = rate
        self.clock = clock
        self.tokens = burst
        self.checked = clock()

    def take(self) -> float | None:
        """Spend one token: None when there was one, else the seconds until there will be."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.checked) * self.rate)
        self.checked = now
        if self.tokens >= 1:
            self.tokens -= 1
            return None
        return (1 - self.tokens) / self.rate if self.rate > 0 else 60.0
