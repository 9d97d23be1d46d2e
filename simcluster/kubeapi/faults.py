"""Fault injection and write accounting, shared between the server loop and test/worker threads.

All state sits behind one lock because tests arm faults from their own thread while the server's
event loop consumes them. Faults are checked in this order for every request except ``/_sim/*``,
``/healthz``, ``/readyz``, ``/livez`` and ``/version``:

1. ``drop_next``      - close the TCP connection without answering (counts every request, so a GET
                        the client retries consumes one per attempt; urllib3 retries idempotent
                        methods up to 3 times by default).
2. ``unavailable_for`` - 503 ServiceUnavailable until the window ends.
3. ``throttle_next``  - 429 TooManyRequests with ``Retry-After``.
4. ``slow``           - sleep before handling (then continue normally).
5. writes only (POST/PUT/PATCH/DELETE): ``conflict_next_writes`` (409 Conflict, optionally only for
   one plural) then ``fail_next`` (any status as a ``Status``).

Write accounting: ``writes`` (every write request that targeted a resource, counted before faults
are applied, so retries after an injected 409 count twice) and ``committed`` (writes that were
answered 2xx). Both are :class:`WriteTally` keyed ``(verb, plural, namespace, name)`` where verb is
the HTTP method (``"PATCH"``), plural is ``"ascendjobs"`` or ``"ascendjobs/status"`` for the status
subresource, namespace is ``""`` for cluster-scoped objects, and name is ``None`` for POSTs to a
collection in ``writes`` (the created name is recorded in ``committed``). ``clear()`` disarms faults
but keeps counters; call ``writes.reset()`` / ``committed.reset()`` for those.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
Key = tuple[str, str, str, str | None]


class WriteTally:
    """Thread-safe counter of write requests keyed (verb, plural, namespace, name)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[Key] = Counter()

    def record(self, verb: str, plural: str, namespace: str, name: str | None) -> None:
        with self._lock:
            self._counts[(verb, plural, namespace, name)] += 1

    def count(
        self,
        verb: str | None = None,
        plural: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> int:
        """Sum of all entries matching the given fields (None = any)."""
        with self._lock:
            items = list(self._counts.items())
        return sum(
            n
            for (v, p, ns, nm), n in items
            if (verb is None or v == verb)
            and (plural is None or p == plural)
            and (namespace is None or ns == namespace)
            and (name is None or nm == name)
        )

    def snapshot(self) -> dict[Key, int]:
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def as_json(self) -> list[dict[str, Any]]:
        return [
            {"verb": v, "plural": p, "namespace": ns, "name": nm, "count": n}
            for (v, p, ns, nm), n in sorted(self.snapshot().items(), key=lambda kv: str(kv[0]))
        ]


@dataclass(frozen=True, slots=True)
class Decision:
    """What the server must do with one request (at most one answering fault, plus a delay)."""

    drop: bool = False
    status: int | None = None
    message: str = ""
    retry_after: int | None = None
    delay: float = 0.0


PROCEED = Decision()


class FaultInjector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.writes = WriteTally()
        self.committed = WriteTally()
        self._reset()

    def _reset(self) -> None:
        self._conflicts = 0
        self._conflict_resource: str | None = None
        self._unavailable_until = 0.0
        self._throttle = 0
        self._retry_after = 1
        self._slow_delay = 0.0
        self._slow_count: int | None = None
        self._drop = 0
        self._fail = 0
        self._fail_status = 500

    # --- arming ------------------------------------------------------------------------------------

    def conflict_next_writes(self, count: int, resource: str | None = None) -> None:
        with self._lock:
            self._conflicts = int(count)
            self._conflict_resource = resource

    def unavailable_for(self, seconds: float) -> None:
        with self._lock:
            self._unavailable_until = time.monotonic() + float(seconds)

    def throttle_next(self, count: int, retry_after: int = 1) -> None:
        with self._lock:
            self._throttle = int(count)
            self._retry_after = int(retry_after)

    def slow(self, delay_s: float, count: int | None = None) -> None:
        with self._lock:
            self._slow_delay = float(delay_s)
            self._slow_count = None if count is None else int(count)

    def drop_next(self, count: int) -> None:
        with self._lock:
            self._drop = int(count)

    def fail_next(self, count: int, status: int = 500) -> None:
        status = int(status)
        if not 400 <= status <= 599:
            raise ValueError("status must be a 4xx or 5xx code")
        with self._lock:
            self._fail = int(count)
            self._fail_status = status

    def clear(self) -> None:
        with self._lock:
            self._reset()

    ACTIONS = (
        "conflict_next_writes",
        "unavailable_for",
        "throttle_next",
        "slow",
        "drop_next",
        "fail_next",
        "clear",
    )

    def apply(self, spec: dict[str, Any]) -> None:
        """Arm a fault from an HTTP body ``{"action": name, **kwargs}`` (``POST /_sim/faults``)."""
        action = spec.get("action")
        if action not in self.ACTIONS:
            raise ValueError(f"unknown action {action!r}; expected one of {', '.join(self.ACTIONS)}")
        kwargs = {k: v for k, v in spec.items() if k != "action"}
        getattr(self, action)(**kwargs)

    def state(self) -> dict[str, Any]:
        with self._lock:
            return {
                "conflict_next_writes": self._conflicts,
                "conflict_resource": self._conflict_resource,
                "unavailable_remaining_s": max(0.0, self._unavailable_until - time.monotonic()),
                "throttle_next": self._throttle,
                "retry_after": self._retry_after,
                "slow_delay_s": self._slow_delay,
                "slow_count": self._slow_count,
                "drop_next": self._drop,
                "fail_next": self._fail,
                "fail_status": self._fail_status,
            }

    # --- consuming (server loop) ---------------------------------------------------------------

    def decide(self, method: str, plural: str | None) -> Decision:
        is_write = method in WRITE_METHODS
        with self._lock:
            if self._drop > 0:
                self._drop -= 1
                return Decision(drop=True)
            if self._unavailable_until and time.monotonic() < self._unavailable_until:
                return Decision(status=503, message="the server is currently unable to handle the request")
            if self._throttle > 0:
                self._throttle -= 1
                return Decision(
                    status=429,
                    message="Too many requests, please try again later.",
                    retry_after=self._retry_after,
                )
            delay = 0.0
            if self._slow_delay > 0 and (self._slow_count is None or self._slow_count > 0):
                delay = self._slow_delay
                if self._slow_count is not None:
                    self._slow_count -= 1
            if (
                is_write
                and self._conflicts > 0
                and (self._conflict_resource is None or self._conflict_resource == plural)
            ):
                self._conflicts -= 1
                return Decision(status=409, delay=delay)
            if is_write and self._fail > 0:
                self._fail -= 1
                return Decision(status=self._fail_status, message="injected failure", delay=delay)
            return Decision(delay=delay) if delay else PROCEED
